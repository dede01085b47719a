package docker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
)

// ownedDir makes a directory owned by uid:gid with mode, under a parent
// anyone may enter.
func ownedDir(t *testing.T, uid, gid int, mode os.FileMode) string {
	t.Helper()
	top := t.TempDir()
	if err := os.Chmod(top, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(top, "d")
	if err := os.Mkdir(dir, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	return dir
}

func hostOwner(t *testing.T, p string) [2]uint32 {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return [2]uint32{st.Uid, st.Gid}
}

func TestCommandsRunAsTheWorkspaceOwnerAndAnotherUserIsRefusedNamingIt(t *testing.T) {
	testenv.NeedRoot(t, "workspaces owned by other users")
	c := testClient(t)
	t.Parallel()
	ws := ownedDir(t, 4242, 4343, 0o750)
	t.Run("the default user is the owner", func(t *testing.T) {
		sess := newSession(t, c, sandbox.Spec{Workspace: ws})
		res := run(t, sess, "id -u; id -g; touch made")
		if string(res.Stdout) != "4242\n4343\n" || res.ExitCode != 0 {
			t.Fatalf("id: %q, exit %d, stderr %q", res.Stdout, res.ExitCode, res.Stderr)
		}
		if got := hostOwner(t, filepath.Join(ws, "made")); got != [2]uint32{4242, 4343} {
			t.Errorf("made is owned by %v on the host", got)
		}
		if sess.State().Spec.User != "" {
			t.Errorf("the state's spec says user %q; the session user is the owner, not a request", sess.State().Spec.User)
		}
	})
	t.Run("the owner named as the user is accepted", func(t *testing.T) {
		sess := newSession(t, c, sandbox.Spec{Workspace: ws, User: "4242"})
		if res := run(t, sess, "id -u; id -g"); string(res.Stdout) != "4242\n4343\n" {
			t.Fatalf("id: %q", res.Stdout)
		}
	})
	for _, user := range []string{"1000", "4242:1000", "0"} {
		t.Run("user "+user+" is refused naming the directory, its owner and mode", func(t *testing.T) {
			sess, err := c.Create(testCtx(t), sandbox.Spec{Workspace: ws, User: user})
			if err == nil {
				sess.Close(context.Background())
				t.Fatal("create succeeded")
			}
			for _, want := range []string{ws, "owner 4242:4343", "mode 0750", "leave the user unset"} {
				if !errors.Is(err, sandbox.ErrPolicyUnsupported) || !strings.Contains(err.Error(), want) {
					t.Fatalf("err = %v; want ErrPolicyUnsupported saying %q", err, want)
				}
			}
		})
	}
	if got := hostOwner(t, ws); got != [2]uint32{4242, 4343} {
		t.Errorf("the workspace is owned by %v now", got)
	}
}

func TestTheWorkspaceTheBackendMakesBelongsToTheRequestedUser(t *testing.T) {
	testenv.NeedRoot(t, "giving a workspace to another user")
	c := testClient(t)
	t.Parallel()
	sess := newSession(t, c, sandbox.Spec{User: "4242:4343"})
	res := run(t, sess, "id -u; id -g; echo x > f")
	if string(res.Stdout) != "4242\n4343\n" || res.ExitCode != 0 {
		t.Fatalf("id: %q, exit %d, stderr %q", res.Stdout, res.ExitCode, res.Stderr)
	}
	ws := sess.State().Workspace
	for _, p := range []string{ws, filepath.Join(ws, "f")} {
		if got := hostOwner(t, p); got != [2]uint32{4242, 4343} {
			t.Errorf("%s is owned by %v", p, got)
		}
	}
}

func TestAReadWriteMountMustBelongToTheSessionUser(t *testing.T) {
	testenv.NeedRoot(t, "mounts owned by other users")
	c := testClient(t)
	t.Parallel()
	ws := ownedDir(t, 1000, 1000, 0o755)
	t.Run("one the session user owns is writable and keeps its owner", func(t *testing.T) {
		mine := ownedDir(t, 1000, 1000, 0o700)
		sess := newSession(t, c, sandbox.Spec{Workspace: ws, Mounts: []sandbox.Mount{{Source: mine, Target: "/data/m"}}})
		if res := run(t, sess, "echo x > /data/m/f && mkdir /data/m/d"); res.ExitCode != 0 {
			t.Fatalf("write the mount: exit %d, stderr %q", res.ExitCode, res.Stderr)
		}
		if err := sess.WriteFile(testCtx(t), "/data/m/api.txt", []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"f", "d", "api.txt", "."} {
			if got := hostOwner(t, filepath.Join(mine, p)); got != [2]uint32{1000, 1000} {
				t.Errorf("%s is owned by %v on the host", p, got)
			}
		}
	})
	refused := []struct {
		name, says string
		uid        int
		mode       os.FileMode
		readOnly   bool
	}{
		{"one of another user is refused naming it, its owner and the way out", "belongs to 4242:4242", 4242, 0o777, false},
		{"one its owner may not write is refused naming its mode", "mode 0555", 1000, 0o555, false},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			src := ownedDir(t, tc.uid, tc.uid, tc.mode)
			sess, err := c.Create(testCtx(t), sandbox.Spec{Workspace: ws, Mounts: []sandbox.Mount{{Source: src, Target: "/data/m"}}})
			if err == nil {
				sess.Close(context.Background())
				t.Fatal("create succeeded")
			}
			for _, want := range []string{src, tc.says, "read-only"} {
				if !errors.Is(err, sandbox.ErrPolicyUnsupported) || !strings.Contains(err.Error(), want) {
					t.Fatalf("err = %v; want ErrPolicyUnsupported saying %q", err, want)
				}
			}
			// Read-only, the same directory is fine.
			sess = newSession(t, c, sandbox.Spec{Workspace: ws, Mounts: []sandbox.Mount{{Source: src, Target: "/data/m", ReadOnly: true}}})
			if res := run(t, sess, "ls /data/m"); res.ExitCode != 0 {
				t.Fatalf("ls of the read-only mount: exit %d, stderr %q", res.ExitCode, res.Stderr)
			}
		})
	}
}

func TestAWorkspacePathReplacedWhileStoppedIsNotBoundAgain(t *testing.T) {
	testenv.NeedRoot(t, "looking into the container's mounts")
	c := testClient(t)
	t.Parallel()
	ctx := testCtx(t)
	ws := ownedDir(t, 1000, 1000, 0o755)
	// Detached: the engine removes a session of a process once it stops.
	sess := newSession(t, c, sandbox.Spec{Workspace: ws, Detached: true})
	st := sess.State()
	if err := sess.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	// While it is stopped the path comes to name another directory (a
	// link to a host directory, as a swap would leave it).
	host := ownedDir(t, 0, 0, 0o755)
	if err := os.Rename(ws, ws+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(host, ws); err != nil {
		t.Fatal(err)
	}
	_, err := c.Resume(ctx, st)
	if !errors.Is(err, sandbox.ErrGone) || !strings.Contains(err.Error(), "replaced") {
		t.Fatalf("resume over a replaced workspace path: %v; want ErrGone saying it was replaced", err)
	}
	if c.Alive(st) {
		t.Error("the container that got the other directory still runs")
	}
}

func TestAnEngineThatRemapsIDsIsRefusedSayingWhy(t *testing.T) {
	for _, tc := range []struct {
		name   string
		engine engineInfo
		says   string
	}{
		{"userns-remap", engineInfo{usernsRemap: true}, "userns-remap"},
		{"rootless", engineInfo{rootless: true}, "rootless"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Client{host: "unix:///run/test.sock", engine: tc.engine}
			_, err := c.normalize(sandbox.Spec{})
			if !errors.Is(err, sandbox.ErrPolicyUnsupported) || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), "owner") {
				t.Fatalf("err = %v; want ErrPolicyUnsupported saying %q and why", err, tc.says)
			}
		})
	}
}
