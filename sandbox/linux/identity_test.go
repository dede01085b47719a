package linux

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
)

// TestAWorkspaceThatCannotBeIdmappedIsRefusedByName: a directory on a
// file system without idmapped mounts (ramfs has none) is refused before
// anything runs, naming the directory and the way out, and the failed
// create leaves nothing behind.
func TestAWorkspaceThatCannotBeIdmappedIsRefusedByName(t *testing.T) {
	c := newTestClient(t)
	if c.rootless {
		t.Skip("rootless sessions bind the caller's own directories, without idmapping")
	}
	ws := filepath.Join(t.TempDir(), "ramfs")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("agentbox-test", ws, "ramfs", 0, ""); err != nil {
		testenv.NeedKernel(t, "ramfs", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(ws, unix.MNT_DETACH) })
	_, err := c.Create(context.Background(), sandbox.Spec{Workspace: ws})
	if err == nil {
		t.Fatal("a workspace on ramfs was accepted")
	}
	for _, want := range []string{ws, "idmapped mounts", "let the session create its workspace"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if entries := sessionEntries(c.opts.StateDir); len(entries) > 0 {
		t.Errorf("the refused create left %v in the state directory", names(entries))
	}
}

// TestTheCallersDirectoryIsTheSandboxUsersWhoeverOwnsIt: a workspace owned
// by root, by uid 1000 or by another uid, mode 0700 or 0755, is the
// sandbox user's inside (it writes, creates, renames, and git trusts the
// repository), what it makes is the directory owner's on the host, and
// nothing on the host changes owner.
func TestTheCallersDirectoryIsTheSandboxUsersWhoeverOwnsIt(t *testing.T) {
	c := newTestClient(t)
	if c.rootless {
		t.Skip("a rootless session's workspace is the caller's own by design")
	}
	git, err := exec.LookPath("git")
	if err != nil {
		testenv.Skipf(t, "git is not installed")
	}
	for _, owner := range []int{0, 1000, 4242} {
		for _, mode := range []os.FileMode{0o700, 0o755} {
			t.Run(strings.Join([]string{"owned by", itoa(owner), "mode", mode.String()}, " "), func(t *testing.T) {
				ws := filepath.Join(t.TempDir(), "project")
				if err := os.Mkdir(ws, mode); err != nil {
					t.Fatal(err)
				}
				run := func(args ...string) {
					t.Helper()
					cmd := exec.Command(git, args...)
					cmd.Dir = ws
					if out, err := cmd.CombinedOutput(); err != nil {
						t.Fatalf("git %v: %v\n%s", args, err, out)
					}
				}
				run("init", "-q")
				if err := os.WriteFile(filepath.Join(ws, "existing.txt"), []byte("old\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(ws, mode); err != nil {
					t.Fatal(err)
				}
				if err := filepath.Walk(ws, func(p string, _ os.FileInfo, err error) error {
					if err != nil {
						return err
					}
					return os.Lchown(p, owner, owner)
				}); err != nil {
					t.Fatal(err)
				}
				before := owners(t, ws)
				s := newTestSession(t, c, sandbox.Spec{Workspace: ws})
				res := run1(t, s, `set -e
echo new >> existing.txt
echo made > made.txt
mkdir dir && echo deep > dir/f
mv made.txt renamed.txt
git status --porcelain >/dev/null
echo ok`)
				if res.ExitCode != 0 || !strings.HasSuffix(string(res.Stdout), "ok\n") {
					t.Fatalf("in the workspace: exit %d\nstdout %s\nstderr %s", res.ExitCode, res.Stdout, res.Stderr)
				}
				for _, p := range []string{"renamed.txt", "dir", "dir/f"} {
					var st unix.Stat_t
					if err := unix.Lstat(filepath.Join(ws, p), &st); err != nil {
						t.Fatal(err)
					}
					if int(st.Uid) != owner || int(st.Gid) != owner {
						t.Errorf("%s made inside is %d:%d on the host, want the directory owner's %d:%d", p, st.Uid, st.Gid, owner, owner)
					}
				}
				after := owners(t, ws)
				for p, o := range before {
					if after[p] != o {
						t.Errorf("%s changed owner on the host: %v -> %v", p, o, after[p])
					}
				}
			})
		}
	}
}

// owners maps every path under dir to its host uid:gid.
func owners(t *testing.T, dir string) map[string][2]uint32 {
	t.Helper()
	out := map[string][2]uint32{}
	err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		out[p] = [2]uint32{st.Uid, st.Gid}
		return nil
	})
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return out
}

func itoa(n int) string { return strconv.Itoa(n) }

// run1 runs a shell script in s.
func run1(t *testing.T, s sandbox.Session, script string) sandbox.ExecResult {
	t.Helper()
	return run(t, s, "sh", "-c", script)
}
