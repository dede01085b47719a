package wsfs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/sandbox"
)

// watching opens a watch of rel under a fresh root and returns the root's
// host directory and the events.
func watching(t *testing.T, rel string, o WatchOptions, prepare ...func(dir string)) (string, <-chan sandbox.WatchEvent, context.CancelFunc) {
	t.Helper()
	dir := t.TempDir()
	for _, p := range prepare {
		p(dir)
	}
	r, err := Open(dir)
	must(t, err)
	t.Cleanup(func() { r.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ch, err := r.Watch(ctx, rel, o)
	must(t, err)
	return dir, ch, cancel
}

// expect reads events until one matches want (Op, Path, OldPath), failing
// after a few seconds; it returns what it read before.
func expect(t *testing.T, ch <-chan sandbox.WatchEvent, want sandbox.WatchEvent) []sandbox.WatchEvent {
	t.Helper()
	var seen []sandbox.WatchEvent
	timeout := time.After(5 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("the watch ended before %+v; saw %+v", want, seen)
			}
			if ev.Op == want.Op && ev.Path == want.Path && ev.OldPath == want.OldPath {
				return seen
			}
			seen = append(seen, ev)
		case <-timeout:
			t.Fatalf("no %+v in 5 s; saw %+v", want, seen)
		}
	}
}

// quiet checks that no event arrives for a moment, or only ones that ok
// accepts.
func quiet(t *testing.T, ch <-chan sandbox.WatchEvent, ok func(sandbox.WatchEvent) bool) {
	t.Helper()
	timeout := time.After(200 * time.Millisecond)
	for {
		select {
		case ev, open := <-ch:
			if open && !ok(ev) {
				t.Fatalf("unexpected event %+v", ev)
			}
			if !open {
				return
			}
		case <-timeout:
			return
		}
	}
}

func TestWatchReportsCreateWriteRenameRemove(t *testing.T) {
	dir, ch, _ := watching(t, ".", WatchOptions{})
	f := filepath.Join(dir, "a.txt")
	must(t, os.WriteFile(f, []byte("one"), 0o644))
	expect(t, ch, sandbox.WatchEvent{Op: sandbox.WatchCreate, Path: "a.txt"})
	expect(t, ch, sandbox.WatchEvent{Op: sandbox.WatchWrite, Path: "a.txt"})
	must(t, os.Rename(f, filepath.Join(dir, "b.txt")))
	expect(t, ch, sandbox.WatchEvent{Op: sandbox.WatchRename, Path: "b.txt", OldPath: "a.txt"})
	must(t, os.Remove(filepath.Join(dir, "b.txt")))
	expect(t, ch, sandbox.WatchEvent{Op: sandbox.WatchRemove, Path: "b.txt"})
}

// A file written again later, with no other change in between, is
// reported again: an editor saving the same file twice is two writes.
func TestWatchReportsEachLaterWriteToTheSameFile(t *testing.T) {
	dir, ch, _ := watching(t, ".", WatchOptions{})
	f := filepath.Join(dir, "a.txt")
	must(t, os.WriteFile(f, []byte("one"), 0o644))
	expect(t, ch, sandbox.WatchEvent{Op: sandbox.WatchWrite, Path: "a.txt"})
	for _, text := range []string{"two", "three"} {
		time.Sleep(50 * time.Millisecond)
		must(t, os.WriteFile(f, []byte(text), 0o644))
		expect(t, ch, sandbox.WatchEvent{Op: sandbox.WatchWrite, Path: "a.txt"})
	}
}

func TestWatchFollowsNewDirectoriesAndRenamedOnes(t *testing.T) {
	dir, ch, _ := watching(t, ".", WatchOptions{})
	// Made at once: the inner directories exist before the watch can
	// follow them, and are reported from the scan of the new one.
	must(t, os.MkdirAll(filepath.Join(dir, "a/b/c"), 0o755))
	expect(t, ch, sandbox.WatchEvent{Op: sandbox.WatchCreate, Path: "a"})
	expect(t, ch, sandbox.WatchEvent{Op: sandbox.WatchCreate, Path: "a/b/c"})
	must(t, os.WriteFile(filepath.Join(dir, "a/b/c/deep"), []byte("x"), 0o644))
	expect(t, ch, sandbox.WatchEvent{Op: sandbox.WatchCreate, Path: "a/b/c/deep"})
	must(t, os.Rename(filepath.Join(dir, "a"), filepath.Join(dir, "z")))
	expect(t, ch, sandbox.WatchEvent{Op: sandbox.WatchRename, Path: "z", OldPath: "a"})
	must(t, os.WriteFile(filepath.Join(dir, "z/b/c/deep"), []byte("more"), 0o644))
	expect(t, ch, sandbox.WatchEvent{Op: sandbox.WatchWrite, Path: "z/b/c/deep"})
}

func TestWatchReportsAMoveOutOfTheTreeAsARemoval(t *testing.T) {
	outside := t.TempDir()
	dir, ch, _ := watching(t, "in", WatchOptions{}, func(dir string) {
		must(t, os.MkdirAll(filepath.Join(dir, "in/sub"), 0o755))
	})
	must(t, os.Rename(filepath.Join(dir, "in/sub"), filepath.Join(outside, "sub")))
	expect(t, ch, sandbox.WatchEvent{Op: sandbox.WatchRemove, Path: "in/sub"})
	// What happens to it out there is no longer reported.
	must(t, os.WriteFile(filepath.Join(outside, "sub/f"), []byte("x"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "in/g"), []byte("x"), 0o644))
	seen := expect(t, ch, sandbox.WatchEvent{Op: sandbox.WatchCreate, Path: "in/g"})
	for _, ev := range seen {
		if strings.Contains(ev.Path, "sub/f") {
			t.Fatalf("a file in a directory moved away was reported: %+v", ev)
		}
	}
}

// Threat: a symlink planted in the workspace to a host directory must not
// make the host watch that directory and report its files.
func TestWatchNeverFollowsASymlinkOut(t *testing.T) {
	host := t.TempDir()
	_, ch, _ := watching(t, ".", WatchOptions{}, func(dir string) {
		must(t, os.Symlink(host, filepath.Join(dir, "link")))
	})
	must(t, os.WriteFile(filepath.Join(host, "secret"), []byte("x"), 0o644))
	quiet(t, ch, func(sandbox.WatchEvent) bool { return false })

	dir := t.TempDir()
	must(t, os.Symlink(host, filepath.Join(dir, "link")))
	r, err := Open(dir)
	must(t, err)
	defer r.Close()
	// The link's target resolves inside the root, where it names nothing.
	if _, err := r.Watch(context.Background(), "link", WatchOptions{}); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("a watch through a link to a host directory: err = %v, want ErrNotFound", err)
	}
}

func TestWatchSkipsExcludedPaths(t *testing.T) {
	dir, ch, _ := watching(t, ".", WatchOptions{Exclude: []string{"secret"}}, func(dir string) {
		must(t, os.Mkdir(filepath.Join(dir, "secret"), 0o755))
	})
	must(t, os.WriteFile(filepath.Join(dir, "secret/key"), []byte("x"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "secret2"), []byte("x"), 0o644))
	seen := expect(t, ch, sandbox.WatchEvent{Op: sandbox.WatchCreate, Path: "secret2"})
	for _, ev := range seen {
		t.Fatalf("an excluded path was reported: %+v", ev)
	}
	r, err := Open(dir)
	must(t, err)
	defer r.Close()
	if _, err := r.Watch(context.Background(), "secret", WatchOptions{Exclude: []string{"secret"}}); !errors.Is(err, sandbox.ErrPathEscape) {
		t.Fatalf("watching an excluded path: err = %v", err)
	}
}

func TestWatchOverflowsInsteadOfGrowing(t *testing.T) {
	dir, ch, _ := watching(t, ".", WatchOptions{Queue: 4})
	for i := range 50 {
		must(t, os.WriteFile(filepath.Join(dir, fmt.Sprint("f", i)), nil, 0o644))
	}
	time.Sleep(100 * time.Millisecond) // the watcher reads them all meanwhile
	var n int
	for {
		ev := <-ch
		n++
		if ev.Op == sandbox.WatchOverflow {
			if !strings.Contains(ev.Err, "fell behind") {
				t.Fatalf("overflow without its reason: %+v", ev)
			}
			break
		}
		if n > 5 {
			t.Fatalf("%d events from a queue of 4 and no overflow", n)
		}
	}
	// Once the reader keeps up, events flow again.
	must(t, os.WriteFile(filepath.Join(dir, "after"), nil, 0o644))
	expect(t, ch, sandbox.WatchEvent{Op: sandbox.WatchCreate, Path: "after"})
}

func TestWatchStopsAtItsDirectoryLimit(t *testing.T) {
	dir, ch, _ := watching(t, ".", WatchOptions{MaxDirs: 2})
	must(t, os.MkdirAll(filepath.Join(dir, "a/b/c"), 0o755))
	expect(t, ch, sandbox.WatchEvent{Op: sandbox.WatchOverflow})
	must(t, os.WriteFile(filepath.Join(dir, "a/b/c/f"), nil, 0o644))
	quiet(t, ch, func(ev sandbox.WatchEvent) bool { return ev.Path != "a/b/c/f" })
}

func TestWatchEnds(t *testing.T) {
	t.Run("when the context ends", func(t *testing.T) {
		_, ch, cancel := watching(t, ".", WatchOptions{})
		cancel()
		select {
		case _, ok := <-ch:
			for ok {
				_, ok = <-ch
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the watch went on after its context ended")
		}
	})
	t.Run("when the watched directory is removed", func(t *testing.T) {
		dir, ch, _ := watching(t, "sub", WatchOptions{}, func(dir string) {
			must(t, os.Mkdir(filepath.Join(dir, "sub"), 0o755))
		})
		must(t, os.Remove(filepath.Join(dir, "sub")))
		expect(t, ch, sandbox.WatchEvent{Op: sandbox.WatchRemove, Path: "sub"})
		select {
		case _, ok := <-ch:
			if ok {
				t.Fatal("an event after the watched directory's removal")
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the watch went on after its directory went")
		}
	})
}

func TestWatchRefusesBadPaths(t *testing.T) {
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "file"), nil, 0o644))
	r, err := Open(dir)
	must(t, err)
	defer r.Close()
	for _, tt := range []struct {
		rel  string
		kind error
	}{{"../x", sandbox.ErrPathEscape}, {"missing", sandbox.ErrNotFound}, {"file", sandbox.ErrInvalid}} {
		if _, err := r.Watch(context.Background(), tt.rel, WatchOptions{}); !errors.Is(err, tt.kind) {
			t.Errorf("watch %q: err = %v, want %v", tt.rel, err, tt.kind)
		}
	}
}
