package docker

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
)

// TestTheWorkspaceItMakesIsBoundedAndLeavesNothingOnTheHost: a workspace
// the backend makes is a tmpfs of 2 GiB and 256 Ki inodes, named by no
// host path inside (the mount table) or outside (once the container runs,
// only the container holds it, so a killed owner leaves nothing), and
// another client still reaches its files.
func TestTheWorkspaceItMakesIsBoundedAndLeavesNothingOnTheHost(t *testing.T) {
	testenv.NeedRoot(t, "mounting a workspace's tmpfs")
	c := testClient(t)
	t.Parallel()
	sess := newSession(t, c, sandbox.Spec{})
	if got := string(run(t, sess, "df -k /workspace | awk 'NR==2 {print $2}'; df -i /workspace | awk 'NR==2 {print $2}'").Stdout); got != "2097152\n262144\n" {
		t.Errorf("the workspace's size in KiB and its inodes: %q, want 2097152 and 262144", got)
	}
	if got := string(run(t, sess, "grep -c "+workspacePrefix+" /proc/self/mountinfo || true").Stdout); got != "0\n" {
		t.Errorf("%s lines of the container's mount table name the host's workspace path", strings.TrimSpace(got))
	}
	if left, _ := filepath.Glob(filepath.Join(os.TempDir(), workspacePrefix+sess.ID()+"-*")); len(left) > 0 {
		t.Errorf("the workspace's host path is still there while the container runs: %v", left)
	}
	run(t, sess, "echo made > f")
	again, err := testClient(t).Resume(testCtx(t), sess.State())
	if err != nil {
		t.Fatalf("resume from another client: %v", err)
	}
	if b, err := again.ReadFile(testCtx(t), "f"); err != nil || string(b) != "made\n" {
		t.Fatalf("the resumed session reads %q, %v", b, err)
	}
}

// TestDiskBoundsTheWorkspaceItMakes: --disk is the size of the workspace
// the backend makes; a directory of the user's cannot be bounded and is
// refused, saying so.
func TestDiskBoundsTheWorkspaceItMakes(t *testing.T) {
	testenv.NeedRoot(t, "mounting a workspace's tmpfs")
	c := testClient(t)
	t.Parallel()
	disk := sandbox.Policy{Resources: sandbox.Resources{DiskBytes: 8 << 20}}
	sess := newSession(t, c, sandbox.Spec{Policy: disk})
	res := run(t, sess, "dd if=/dev/zero of=big bs=1M count=16 2>&1")
	if res.ExitCode == 0 || !strings.Contains(string(res.Stdout), "No space left") {
		t.Errorf("16 MiB into an 8 MiB workspace: exit %d, %s", res.ExitCode, res.Stdout)
	}
	_, err := c.Create(testCtx(t), sandbox.Spec{Workspace: t.TempDir(), Policy: disk})
	if !errors.Is(err, sandbox.ErrPolicyUnsupported) || !strings.Contains(err.Error(), "only a workspace it makes") {
		t.Fatalf("--disk on a directory of the user's: %v; want it refused, saying why", err)
	}
}

// TestADetachedSessionsWorkspaceGoesWithIt: a detached session keeps its
// tmpfs on the host (Stop and Resume need it) until it is closed, and
// then nothing of it is left.
func TestADetachedSessionsWorkspaceGoesWithIt(t *testing.T) {
	testenv.NeedRoot(t, "mounting a workspace's tmpfs")
	c := testClient(t)
	t.Parallel()
	sess, err := c.Create(testCtx(t), sandbox.Spec{Detached: true})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(sess.State().Workspace)
	if !strings.HasPrefix(filepath.Base(dir), workspacePrefix) {
		t.Fatalf("workspace %s", sess.State().Workspace)
	}
	run(t, sess, "echo kept > f")
	if err := sess.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the workspace's directory %s after Close: %v", dir, err)
	}
	if b, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(b), dir) {
		t.Errorf("a mount on %s is left after Close", dir)
	}
}

// TestGCRemovesTheWorkspaceOfASessionWithNoContainer: what an agentbox
// killed while it made a session leaves (a workspace directory whose
// session never got a container, or lost it) gc removes once it is old
// enough not to be one still being made; a young one it leaves.
func TestGCRemovesTheWorkspaceOfASessionWithNoContainer(t *testing.T) {
	// Not parallel: gc removes what other tests' killed owners leave.
	c := testClient(t)
	old := filepath.Join(os.TempDir(), workspacePrefix+"dk-0ld0000000000-1")
	young := filepath.Join(os.TempDir(), workspacePrefix+"dk-y0ung0000000-1")
	for _, d := range []string{old, young} {
		if err := os.MkdirAll(filepath.Join(d, "w"), 0o700); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(d) })
	}
	if os.Geteuid() == 0 {
		// As the workspaces of an older agentbox were: given to the
		// session user.
		if err := os.Chown(old, 1000, 1000); err != nil {
			t.Fatal(err)
		}
	}
	then := time.Now().Add(-2 * orphanAge)
	if err := os.Chtimes(old, then, then); err != nil {
		t.Fatal(err)
	}
	reaped, err := c.GC(testCtx(t), GCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("the old orphan workspace %s after gc: %v (reaped %+v)", old, err, reaped)
	}
	if _, err := os.Stat(young); err != nil {
		t.Errorf("gc removed a workspace that may still be being made: %v", err)
	}
}
