package docker

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/moby/moby/api/types/container"

	"github.com/agentbox/agentbox/internal/owned"
	"github.com/agentbox/agentbox/sandbox"
)

func TestAPolicyPathThroughASymlinkInTheWorkspaceIsRefused(t *testing.T) {
	ws := t.TempDir()
	host := t.TempDir() // stands for a host directory such as /root
	if err := os.Symlink(host, filepath.Join(ws, "in")); err != nil {
		t.Fatal(err)
	}
	for name, pol := range map[string]sandbox.FilesystemPolicy{
		"read-only": {ReadOnly: []string{"/workspace/in/sub"}},
		"deny":      {Deny: []string{"/workspace/in"}},
	} {
		t.Run(name, func(t *testing.T) {
			spec := sandbox.Spec{Workdir: "/workspace", Policy: sandbox.Policy{Filesystem: pol}}
			hc := &container.HostConfig{Tmpfs: map[string]string{}}
			held, err := owned.Open(ws)
			if err != nil {
				t.Fatal(err)
			}
			defer held.Close()
			err = planReadOnly(hc, spec, &bindSet{ws: held})
			if err == nil {
				err = planDeny(hc, spec, ws)
			}
			if !errors.Is(err, sandbox.ErrPathEscape) {
				t.Fatalf("plan = %v (mounts %+v), want ErrPathEscape", err, hc.Mounts)
			}
			if _, err := os.Stat(filepath.Join(host, "sub")); err == nil {
				t.Error("a directory was created on the host through the link")
			}
		})
	}
}
