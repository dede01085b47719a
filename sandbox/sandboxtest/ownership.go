package sandboxtest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
)

// The ownership rule every backend keeps (issue 15): a session on a
// directory someone owns can write it (an existing file, new files and
// directories, a rename, git status in a repository there); what the
// session creates, by command or by WriteFile, belongs on the host to the
// directory's owner (uid and gid); nothing that existed on the host
// changes owner; the same holds for a session seeded from a snapshot and
// one resumed or rebuilt from saved state. A backend that cannot keep the
// rule for a directory refuses the spec up front, with an error that
// names the directory and its owner's uid, rather than failing at the
// first write: the suite accepts either. Owners other than the caller
// need root to set up (testenv.NeedRoot).

func ownershipTests() []testCase {
	var tests []testCase
	for _, o := range ownersToTry() {
		for _, mode := range []fs.FileMode{0o700, 0o755} {
			tests = append(tests, testCase{
				name: fmt.Sprintf("a workspace of mode %04o owned by %s can be written and keeps its owner", mode, o.name),
				run:  func(t *testing.T, s *suite) { testOwnedWorkspace(t, s, o, mode) },
			})
		}
	}
	return append(tests,
		testCase{name: "a snapshot of an owned workspace seeds sessions that can write", run: testOwnedSnapshot},
		testCase{name: "a session resumed or rebuilt from saved state can write", needs: CapResume, run: testOwnedResume},
	)
}

// hostOwner is a uid:gid a test directory is given to.
type hostOwner struct {
	name     string
	uid, gid int
}

func (o hostOwner) String() string { return fmt.Sprintf("%d:%d", o.uid, o.gid) }

// ownersToTry are root, the default sandbox user, and a uid that is
// neither (and has no account), for the directory's owner.
func ownersToTry() []hostOwner {
	return []hostOwner{
		{"root", 0, 0},
		{"uid 1000", sandbox.DefaultUID, sandbox.DefaultGID},
		{"uid 4242", 4242, 4242},
	}
}

// ownedDir makes dir with mode, owned by o, under a parent others can
// enter (t.TempDir's own directories are 0700). Giving it to another
// uid needs root; as another user only the caller's own uid is tried.
func ownedDir(t *testing.T, o hostOwner, mode fs.FileMode) string {
	t.Helper()
	if o.uid != os.Geteuid() || o.gid != os.Getegid() {
		testenv.NeedRoot(t, "making a workspace owned by "+o.String())
	}
	top := t.TempDir()
	for _, d := range []string{top, filepath.Dir(top)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(top, "ws")
	if err := os.Mkdir(dir, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, o.uid, o.gid); err != nil {
		t.Fatal(err)
	}
	return dir
}

// owners records the uid:gid of every path under dir.
func owners(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		out[p] = ownerString(t, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func ownerString(t *testing.T, p string) string {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return fmt.Sprintf("%d:%d", st.Uid, st.Gid)
}

// noOwnerChanged fails the test for each path of before that still exists
// with another owner.
func noOwnerChanged(t *testing.T, before map[string]string) {
	t.Helper()
	var changed []string
	for p, was := range before {
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		if now := ownerString(t, p); now != was {
			changed = append(changed, fmt.Sprintf("%s was %s, is %s", p, was, now))
		}
	}
	slices.Sort(changed)
	if len(changed) > 0 {
		t.Errorf("host paths changed owner:\n%s", strings.Join(changed, "\n"))
	}
}

// ownedBy fails the test for each of paths (relative to dir) not owned
// by o.
func ownedBy(t *testing.T, dir string, o hostOwner, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if got := ownerString(t, filepath.Join(dir, p)); got != o.String() {
			t.Errorf("%s was created owned by %s on the host; the directory's owner is %s", p, got, o)
		}
	}
}

// createOrRefused creates a session with sp, or accepts a refusal that
// names dir and its owner o: ok is false then, and the test is done.
func createOrRefused(t *testing.T, c sandbox.Client, sp sandbox.Spec, dir string, o hostOwner) (sandbox.Session, bool) {
	t.Helper()
	sess, err := c.Create(ctx(t), sp)
	if err != nil {
		msg := err.Error()
		if !strings.Contains(msg, dir) || !strings.Contains(msg, strconv.Itoa(o.uid)) {
			t.Fatalf("create on %s (owner %s) failed without naming the directory and its owner: %v", dir, o, err)
		}
		t.Logf("refused up front, as allowed: %v", err)
		return nil, false
	}
	closeAtEnd(t, sess)
	return sess, true
}

// gitRepo makes a git repository at dir/repo owned by o when the host has
// git, as a user's checkout would be; false when it has none.
func gitRepo(t *testing.T, dir string, o hostOwner) bool {
	t.Helper()
	git, err := exec.LookPath("git")
	if err != nil {
		return false
	}
	repo := filepath.Join(dir, "repo")
	if out, err := exec.Command(git, "-c", "init.defaultBranch=main", "init", "-q", repo).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v: %s", err, out)
	}
	plant(t, filepath.Join(repo, "tracked.txt"), "tracked\n")
	err = filepath.WalkDir(repo, func(p string, d fs.DirEntry, err error) error {
		if err == nil {
			err = os.Lchown(p, o.uid, o.gid) // the test's own fresh tree
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return true
}

// writeScript writes an existing file, creates, renames, makes nested
// directories, and runs git status in repo when there is one and the
// sandbox has git; it prints "git ok" when git ran.
const writeScript = `set -e
echo changed > existing.txt
echo new > new.txt
mv new.txt moved.txt
mkdir -p made/sub && echo deep > made/sub/f
if [ -d repo ] && command -v git >/dev/null 2>&1; then
	cd repo && echo more > untracked.txt && git status --porcelain >/dev/null && echo "git ok"
fi`

func testOwnedWorkspace(t *testing.T, s *suite, o hostOwner, mode fs.FileMode) {
	dir := ownedDir(t, o, mode)
	existing := filepath.Join(dir, "existing.txt")
	plant(t, existing, "original\n")
	if err := os.Lchown(existing, o.uid, o.gid); err != nil {
		t.Fatal(err)
	}
	hasRepo := gitRepo(t, dir, o)
	before := owners(t, filepath.Dir(dir))
	sess, ok := createOrRefused(t, s.client(t), s.spec(t, func(sp *sandbox.Spec) { sp.Workspace = dir }), dir, o)
	if !ok {
		noOwnerChanged(t, before)
		return
	}
	res := sh(t, sess, writeScript)
	if res.ExitCode != 0 {
		t.Fatalf("writing the workspace failed: exit %d, stderr %q", res.ExitCode, res.Stderr)
	}
	if hasRepo && !strings.Contains(string(res.Stdout), "git ok") {
		t.Logf("git status not tried: the sandbox has no git")
	}
	if err := sess.WriteFile(ctx(t), "api/written.txt", []byte("by the file API"), 0o644); err != nil {
		t.Fatalf("WriteFile in a workspace owned by %s: %v", o, err)
	}
	if got := read(t, existing); got != "changed\n" {
		t.Errorf("existing.txt holds %q after the write", got)
	}
	created := []string{"moved.txt", "made", "made/sub", "made/sub/f", "api", "api/written.txt"}
	if strings.Contains(string(res.Stdout), "git ok") {
		created = append(created, "repo/untracked.txt")
	}
	ownedBy(t, dir, o, created...)
	noOwnerChanged(t, before)
}

func testOwnedSnapshot(t *testing.T, s *suite) {
	if s.cfg.snapshots == nil {
		t.Skip("no snapshot store given (sandboxtest.WithSnapshots)")
	}
	o := hostOwner{"uid 4242", 4242, 4242}
	if os.Geteuid() != 0 {
		o = hostOwner{"the caller", os.Geteuid(), os.Getegid()}
	}
	dir := ownedDir(t, o, 0o700)
	c := s.client(t)
	sess, ok := createOrRefused(t, c, s.spec(t, func(sp *sandbox.Spec) { sp.Workspace = dir }), dir, o)
	if !ok {
		return
	}
	shOK(t, sess, "mkdir -p snap/sub && echo v1 > snap/sub/f && chmod 0600 snap/sub/f")
	ref, err := sess.Snapshot(ctx(t))
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	seedScript := "echo v2 > snap/sub/f && echo new > snap/sub/g && mkdir snap/sub/h && cat snap/sub/f"

	t.Run("into a workspace the backend makes", func(t *testing.T) {
		seeded, err := c.Create(ctx(t), s.spec(t, func(sp *sandbox.Spec) { sp.Workspace, sp.Snapshot = "", ref }))
		if err != nil {
			t.Fatalf("create from snapshot: %v", err)
		}
		closeAtEnd(t, seeded)
		if res := shOK(t, seeded, seedScript); string(res.Stdout) != "v2\n" {
			t.Fatalf("the seeded session read %q", res.Stdout)
		}
		ws := seeded.State().Workspace
		owner := ownerString(t, ws)
		for p, got := range owners(t, ws) {
			if got != owner {
				t.Errorf("%s is owned by %s in a seeded workspace owned by %s", p, got, owner)
			}
		}
	})
	t.Run("into an empty directory the caller owns", func(t *testing.T) {
		empty := ownedDir(t, o, 0o700)
		before := owners(t, filepath.Dir(empty))
		seeded, ok := createOrRefused(t, c, s.spec(t, func(sp *sandbox.Spec) { sp.Workspace, sp.Snapshot = empty, ref }), empty, o)
		if !ok {
			return
		}
		if res := shOK(t, seeded, seedScript); string(res.Stdout) != "v2\n" {
			t.Fatalf("the seeded session read %q", res.Stdout)
		}
		noOwnerChanged(t, before)
		ownedBy(t, empty, o, ".", "snap", "snap/sub", "snap/sub/f", "snap/sub/g", "snap/sub/h")
	})
}

func testOwnedResume(t *testing.T, s *suite) {
	o := hostOwner{"uid 4242", 4242, 4242}
	if os.Geteuid() != 0 {
		o = hostOwner{"the caller", os.Geteuid(), os.Getegid()}
	}
	t.Run("on a directory the caller owns, after Stop", func(t *testing.T) {
		dir := ownedDir(t, o, 0o755)
		before := owners(t, filepath.Dir(dir))
		sess, ok := createOrRefused(t, s.client(t), s.spec(t, func(sp *sandbox.Spec) { sp.Workspace = dir }), dir, o)
		if !ok {
			return
		}
		shOK(t, sess, "echo one > one.txt")
		st := savedState(t, sess)
		if err := sess.Stop(ctx(t)); err != nil {
			t.Fatalf("stop: %v", err)
		}
		again := resumeOrRebuild(t, s, st)
		shOK(t, again, "echo two >> one.txt && echo three > three.txt && mkdir d")
		noOwnerChanged(t, before)
		ownedBy(t, dir, o, "one.txt", "three.txt", "d")
	})
	t.Run("on a workspace the backend made, after a snapshot and Close", func(t *testing.T) {
		if s.cfg.snapshots == nil {
			t.Skip("no snapshot store given (sandboxtest.WithSnapshots)")
		}
		sess, err := s.client(t).Create(ctx(t), s.spec(t, func(sp *sandbox.Spec) { sp.Workspace = "" }))
		if err != nil {
			t.Fatal(err)
		}
		closeAtEnd(t, sess)
		shOK(t, sess, "mkdir -p work && echo one > work/one.txt")
		if _, err := sess.Snapshot(ctx(t)); err != nil {
			t.Fatalf("snapshot: %v", err)
		}
		st := savedState(t, sess)
		if err := sess.Close(ctx(t)); err != nil {
			t.Fatal(err)
		}
		again := resumeOrRebuild(t, s, st)
		shOK(t, again, "echo two >> work/one.txt && echo three > work/three.txt && mkdir work/d && cat work/one.txt")
		ws := again.State().Workspace
		if ws == "" {
			// The workspace is not a directory of this host (a
			// Pod's): the commands above, which wrote, are the test.
			return
		}
		owner := ownerString(t, ws)
		for p, got := range owners(t, ws) {
			if got != owner {
				t.Errorf("%s is owned by %s in a rebuilt workspace owned by %s", p, got, owner)
			}
		}
	})
}

// savedState is sess's state after a round trip through its JSON form,
// as another process reads it.
func savedState(t *testing.T, sess sandbox.Session) sandbox.State {
	t.Helper()
	data, err := sandbox.MarshalState(sess.State())
	if err != nil {
		t.Fatal(err)
	}
	st, err := sandbox.UnmarshalState(data)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// resumeOrRebuild reattaches to st from a fresh client, or rebuilds it
// when the backend says it is gone.
func resumeOrRebuild(t *testing.T, s *suite, st sandbox.State) sandbox.Session {
	t.Helper()
	sess, err := s.client(t).Resume(ctx(t), st)
	if errors.Is(err, sandbox.ErrGone) {
		sess, err = s.client(t).Rebuild(ctx(t), st)
	}
	if err != nil {
		t.Fatalf("resume or rebuild %s: %v", st, err)
	}
	closeAtEnd(t, sess)
	return sess
}
