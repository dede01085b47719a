package local_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/local"
)

func TestAsRootCommandsRunAsTheWorkspaceOwnerAndAnotherUserIsRefused(t *testing.T) {
	testenv.NeedRoot(t, "a workspace owned by another user")
	c, err := local.New(local.Options{Warn: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	top := t.TempDir()
	for _, d := range []string{top, filepath.Dir(top)} { // the owner must reach it
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ws := filepath.Join(top, "ws")
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(ws, 4242, 4343); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sess, err := c.Create(ctx, sandbox.Spec{Workspace: ws, AllowWeaker: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close(ctx)
	res, err := sandbox.Exec(ctx, sess, sandbox.ExecRequest{Cmd: []string{"sh", "-c", "id -u; id -g"}})
	if err != nil || string(res.Stdout) != "4242\n4343\n" {
		t.Fatalf("id in a workspace owned by 4242:4343: %q, %v (stderr %q)", res.Stdout, err, res.Stderr)
	}
	for _, user := range []string{"0", "1000", "4242:0"} {
		_, err := c.Create(ctx, sandbox.Spec{Workspace: ws, User: user, AllowWeaker: true})
		if !errors.Is(err, sandbox.ErrPolicyUnsupported) || !strings.Contains(err.Error(), ws+" (owner 4242:4343, mode 0700)") {
			t.Errorf("user %s on a workspace owned by 4242:4343: err = %v; want ErrPolicyUnsupported naming the directory, its owner and mode", user, err)
		}
	}
}
