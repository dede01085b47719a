package nsinit

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/testenv"
	"golang.org/x/sys/unix"
)

// inMountNamespace runs f on an OS thread of its own in a private mount
// namespace, as the init's buildRoot runs, so that what f mounts never
// reaches the test process. The thread stays locked and ends with f,
// taking the namespace with it.
func inMountNamespace(t *testing.T, f func()) {
	t.Helper()
	testenv.NeedRoot(t, "mounting")
	setup := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread is dropped
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			setup <- err
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			setup <- err
			return
		}
		setup <- nil
		f()
	}()
	if err := <-setup; err != nil {
		testenv.NeedKernel(t, "private mount namespace", err)
	}
	<-done
}

// threadMounts is the mount table of the calling thread's namespace.
func threadMounts(t *testing.T) string {
	b, err := os.ReadFile("/proc/thread-self/mountinfo")
	if err != nil {
		t.Errorf("read mount table: %v", err)
	}
	return string(b)
}

// newLines are the lines of after that before does not hold.
func newLines(before, after string) []string {
	var out []string
	for _, l := range strings.Split(after, "\n") {
		if l != "" && !strings.Contains(before, l+"\n") {
			out = append(out, l)
		}
	}
	return out
}

// swapTree is a sandbox root whose workspace holds links planted as a
// race after noSymlinks would: workspace/in and workspace/data lead to
// the directory outside, workspace/cred to the file outside/secret.
func swapTree(t *testing.T) (root, outside string) {
	t.Helper()
	root, outside = t.TempDir(), t.TempDir()
	ws := filepath.Join(root, "workspace")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{
		"in": outside, "data": outside, "cred": filepath.Join(outside, "secret"),
	} {
		if err := os.Symlink(target, filepath.Join(ws, name)); err != nil {
			t.Fatal(err)
		}
	}
	return root, outside
}

// TestMountsOnASwappedPathNeverLeaveTheRoot plants, for each kind of
// mount buildRoot makes on a sandbox path, the symlink a racing process
// would swap in, and calls the mount directly: it must be refused naming
// the link, and the mount table and the link's target must be as before.
// Mounting by name would have bound the outside directory (the host's
// /etc, say) into the sandbox, or masked it instead of the secret.
func TestMountsOnASwappedPathNeverLeaveTheRoot(t *testing.T) {
	src := t.TempDir()
	cases := []struct {
		name  string
		mount func(root string) error
		link  string
	}{
		{"a read-only policy path", func(root string) error { return bindReadOnly(root, "/workspace/in") }, "/workspace/in"},
		{"a read-only policy path below a link", func(root string) error { return bindReadOnly(root, "/workspace/in/secret") }, "/workspace/in"},
		{"a mount target", func(root string) error { return bindInto(root, src, "/workspace/data", false) }, "/workspace/data"},
		{"a mount target to make below a link", func(root string) error { return bindInto(root, src, "/workspace/data/new/dir", true) }, "/workspace/data"},
		{"a file mount target", func(root string) error {
			return bindInto(root, filepath.Join(src, "f"), "/workspace/cred", true)
		}, "/workspace/cred"},
		{"a denied file", func(root string) error { return denyPath(root, "/workspace/cred") }, "/workspace/cred"},
		{"a denied directory", func(root string) error { return denyPath(root, "/workspace/in") }, "/workspace/in"},
		{"a denied path below a link", func(root string) error { return denyPath(root, "/workspace/data/secret") }, "/workspace/data"},
		{"a missing denied path below a link", func(root string) error { return denyPath(root, "/workspace/data/new/secret") }, "/workspace/data"},
	}
	if err := os.WriteFile(filepath.Join(src, "f"), []byte("mount source"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root, outside := swapTree(t)
			inMountNamespace(t, func() {
				before := threadMounts(t)
				err := tc.mount(root)
				if err == nil {
					t.Errorf("the mount went through the link")
				} else if want := "symbolic link " + tc.link; !strings.Contains(err.Error(), want) {
					t.Errorf("err = %v, want a refusal naming %q", err, want)
				}
				if added := newLines(before, threadMounts(t)); len(added) > 0 {
					t.Errorf("mounted: %q", added)
				}
				b, err := os.ReadFile(filepath.Join(outside, "secret"))
				if string(b) != "host secret" {
					t.Errorf("the link's target file reads %q, %v; want it untouched", b, err)
				}
				if names, _ := os.ReadDir(outside); len(names) != 1 {
					t.Errorf("the link's target holds %v, want only its secret", names)
				}
			})
		})
	}
}

// TestMountsByDescriptorLandOnThePathChecked: the same mounts on real
// paths hold as the policy says (read-only, hidden, bound), and the
// staging points are left unmounted for the next.
func TestMountsByDescriptorLandOnThePathChecked(t *testing.T) {
	root, src := t.TempDir(), t.TempDir()
	ws := filepath.Join(root, "workspace")
	for _, d := range []string{"in", "private"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for p, content := range map[string]string{
		filepath.Join(ws, "in", "f"): "in", filepath.Join(ws, "private", "k"): "key",
		filepath.Join(ws, ".env"): "env", filepath.Join(src, "f"): "mounted",
	} {
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, maskFile), nil, 0); err != nil {
		t.Fatal(err)
	}
	inMountNamespace(t, func() {
		steps := []struct {
			name string
			err  error
		}{
			{"read-only path", bindReadOnly(root, "/workspace/in")},
			{"directory mount", bindInto(root, src, "/workspace/out", false)},
			{"file mount", bindInto(root, filepath.Join(src, "f"), "/workspace/conf/f", true)},
			{"denied directory", denyPath(root, "/workspace/private")},
			{"denied file", denyPath(root, "/workspace/.env")},
		}
		for _, s := range steps {
			if s.err != nil {
				t.Errorf("%s: %v", s.name, s.err)
			}
		}
		if err := os.WriteFile(filepath.Join(ws, "in", "g"), nil, 0o644); !errors.Is(err, unix.EROFS) {
			t.Errorf("writing in the read-only path: %v, want EROFS", err)
		}
		if b, err := os.ReadFile(filepath.Join(ws, "in", "f")); string(b) != "in" {
			t.Errorf("the read-only path reads %q, %v; want its own file", b, err)
		}
		if b, err := os.ReadFile(filepath.Join(ws, "out", "f")); string(b) != "mounted" {
			t.Errorf("the directory mount reads %q, %v", b, err)
		}
		if err := os.WriteFile(filepath.Join(ws, "out", "new"), nil, 0o644); err != nil {
			t.Errorf("writing in the read-write mount: %v", err)
		}
		if b, err := os.ReadFile(filepath.Join(ws, "conf", "f")); string(b) != "mounted" {
			t.Errorf("the file mount reads %q, %v", b, err)
		}
		if names, _ := os.ReadDir(filepath.Join(ws, "private")); len(names) > 0 {
			t.Errorf("the denied directory lists %v", names)
		}
		if b, _ := os.ReadFile(filepath.Join(ws, ".env")); len(b) > 0 {
			t.Errorf("the denied file reads %q", b)
		}
		mounts := threadMounts(t)
		for _, p := range []string{"in", "out", "conf/f", "private", ".env"} {
			if !strings.Contains(mounts, " "+filepath.Join(ws, p)+" ") {
				t.Errorf("no mount at %s", filepath.Join(ws, p))
			}
		}
		for _, name := range []string{stageDir, stageFile} {
			if strings.Contains(mounts, " "+filepath.Join(root, name)+" ") {
				t.Errorf("the staging point %s is left mounted", name)
			}
		}
	})
}

// TestMakingAMountPointNeverFollowsALink plants the link that noSymlinks
// would have caught by name, as a race after it would: the descriptor
// walk must refuse it and make nothing where it leads.
func TestMakingAMountPointNeverFollowsALink(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "workspace"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "workspace", "link")); err != nil {
		t.Fatal(err)
	}
	fd, err := makeMountPoint(root, "/workspace/link/new/secret")
	if err == nil {
		unix.Close(fd)
		t.Fatal("made a mount point through a symlink")
	}
	if !strings.Contains(err.Error(), "symbolic link /workspace/link") {
		t.Errorf("err = %v, want a refusal naming the link", err)
	}
	if names, _ := os.ReadDir(outside); len(names) > 0 {
		t.Errorf("the link's target gained %v", names)
	}
}

// TestMakingAMountPointMakesTheMissingDirectories: the descriptor is the
// directory made, and what is made in a directory takes its owner (as
// root, which can give it away).
func TestMakingAMountPointMakesTheMissingDirectories(t *testing.T) {
	root := t.TempDir()
	owner := os.Getuid()
	if owner == 0 {
		owner = 4321
		if err := os.Chown(root, owner, owner); err != nil {
			t.Fatal(err)
		}
	}
	fd, err := makeMountPoint(root, "/workspace/a/b")
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	var want, got unix.Stat_t
	if err := unix.Stat(filepath.Join(root, "workspace", "a", "b"), &want); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fstat(fd, &got); err != nil {
		t.Fatal(err)
	}
	if got.Ino != want.Ino || got.Dev != want.Dev || got.Mode&unix.S_IFMT != unix.S_IFDIR {
		t.Errorf("the descriptor is not the directory made at /workspace/a/b")
	}
	for _, d := range []string{"workspace", "workspace/a", "workspace/a/b"} {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(root, d), &st); err != nil {
			t.Fatal(err)
		}
		if int(st.Uid) != owner || int(st.Gid) != owner {
			t.Errorf("/%s is owned by %d:%d, want its parent's %d:%d", d, st.Uid, st.Gid, owner, owner)
		}
	}
}
