package beneath

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// TestMountsOnTheWayAreEntered: the sandbox's root is laid out in a mount
// namespace of its own and walked there, so a walk must see a mount on
// the way as that namespace does (no RESOLVE_NO_XDEV), not the directory
// under it.
func TestMountsOnTheWayAreEntered(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	tr := newTree(t)
	point := filepath.Join(tr.root, "a/mnt")
	must(t, os.Mkdir(point, 0o755))
	must(t, os.WriteFile(filepath.Join(point, "f"), []byte("under the mount"), 0o644))
	setup := make(chan error, 1)
	done := make(chan struct{})
	var got []string
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread is dropped with its namespace
		err := unix.Unshare(unix.CLONE_NEWNS)
		if err == nil {
			err = unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, "")
		}
		if err == nil {
			err = unix.Mount("beneath-test", point, "tmpfs", 0, "size=64k")
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(point, "f"), []byte("mounted"), 0o644)
		}
		setup <- err
		if err != nil {
			return
		}
		// A descriptor of the root taken in this namespace, as the init
		// takes it.
		root, err := unix.Open(tr.root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			got = append(got, err.Error())
			return
		}
		defer unix.Close(root)
		read := func(fd int, err error) string {
			if err != nil {
				return err.Error()
			}
			defer unix.Close(fd)
			b, err := os.ReadFile("/proc/thread-self/fd/" + strconv.Itoa(fd))
			if err != nil {
				return err.Error()
			}
			return string(b)
		}
		for _, walk := range []bool{false, true} {
			got = append(got,
				read(Open(root, "a/mnt/f", Options{Walk: walk})),
				read(Open(root, "a/mnt/f", Options{Kind: Regular, Make: MakeMissing, Walk: walk})),
				read(OpenInRoot(root, "a/mnt/f", Options{Walk: walk})))
		}
	}()
	if err := <-setup; err != nil {
		t.Skipf("no private mount namespace with a tmpfs: %v", err)
	}
	<-done
	for i, g := range got {
		if g != "mounted" {
			t.Errorf("walk %d read %q, want the file on the mount", i, g)
		}
	}
}
