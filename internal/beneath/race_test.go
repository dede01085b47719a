package beneath

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestASwappedComponentNeverLeadsOutOfTheRoot plays the sandboxed process
// of runc's CVE-2021-30465: it exchanges the directory a with a symlink to
// the outside directory, atomically and over and over, while the walks
// open a/b/file, make directories below a/b and open a/b's parent. Every
// walk must end inside the root (or be refused), none may read the
// outside file or make anything there.
func TestASwappedComponentNeverLeadsOutOfTheRoot(t *testing.T) {
	walks := []struct {
		name string
		open func(tr *tree, walk bool, i int) (int, error)
	}{
		{"Open", func(tr *tree, walk bool, _ int) (int, error) {
			return Open(tr.fd, "a/b/file", Options{Walk: walk})
		}},
		{"Open making directories", func(tr *tree, walk bool, i int) (int, error) {
			return Open(tr.fd, fmt.Sprintf("a/b/new%d/d", i), Options{Kind: Dir, Make: MakeMissing, Walk: walk})
		}},
		{"OpenParent", func(tr *tree, walk bool, _ int) (int, error) {
			fd, _, err := OpenParent(tr.fd, "a/b/file", Options{Walk: walk})
			return fd, err
		}},
		{"OpenInRoot", func(tr *tree, walk bool, _ int) (int, error) {
			return OpenInRoot(tr.fd, "a/b/file", Options{Walk: walk})
		}},
	}
	for _, w := range walks {
		t.Run(w.name, func(t *testing.T) {
			resolvers(t, func(t *testing.T, walk bool) {
				tr := newTree(t)
				must(t, os.Symlink(tr.outside, filepath.Join(tr.root, "x")))
				var stop atomic.Bool
				var wg sync.WaitGroup
				wg.Add(1)
				go func() {
					defer wg.Done()
					a, x := filepath.Join(tr.root, "a"), filepath.Join(tr.root, "x")
					for !stop.Load() {
						_ = unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, x, unix.RENAME_EXCHANGE)
					}
				}()
				opened, refused := 0, 0
				deadline := time.Now().Add(300 * time.Millisecond)
				for i := 0; time.Now().Before(deadline); i++ {
					fd, err := w.open(tr, walk, i)
					if err != nil {
						refused++
						continue
					}
					opened++
					p := where(t, fd)
					outside := !within(tr.root, p)
					var st unix.Stat_t
					if unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG && content(t, fd) != "inside" {
						outside = true
					}
					unix.Close(fd)
					if outside {
						stop.Store(true)
						wg.Wait()
						t.Fatalf("walk %d ended at %s, outside %s", i, p, tr.root)
					}
				}
				stop.Store(true)
				wg.Wait()
				if n := countEntries(t, tr.outside); n != 2 {
					t.Errorf("the outside directory holds %d entries, want its 2", n)
				}
				if opened == 0 {
					t.Fatalf("none of %d walks succeeded: the race did not exercise the inside path", refused)
				}
				t.Logf("%d walks ended inside, %d were refused, none left the root", opened, refused)
			})
		})
	}
}
