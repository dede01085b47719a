package beneath

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestOpenInRoot resolves links as a process chrooted at the directory
// would: a correct resolution of a link to the outside directory lands on
// its decoy copy inside, never on the outside itself.
func TestOpenInRoot(t *testing.T) {
	resolvers(t, func(t *testing.T, walk bool) {
		tr := newTree(t)
		decoy := filepath.Join(tr.root, tr.outside, "b")
		must(t, os.MkdirAll(decoy, 0o755))
		must(t, os.WriteFile(filepath.Join(decoy, "file"), []byte("decoy"), 0o644))
		outsideRel := strings.TrimPrefix(tr.outside, "/")
		link := func(name, target string) { must(t, os.Symlink(target, filepath.Join(tr.root, name))) }
		link("rel", strings.Repeat("../", 20)+outsideRel+"/b/file")
		link("c1", "c2")
		link("c2", "a/c3")
		link("a/c3", filepath.Join(tr.outside, "b/file"))
		link("updir", "a/../../../..")
		link("magic", "/proc/self/root"+tr.outside+"/b/file")
		link("loop1", "loop2")
		link("loop2", "loop1")
		link("tofile", "file.txt/")
		tests := []struct {
			name  string
			path  string
			o     Options
			want  string // content, or "" when an error is wanted
			errno error
		}{
			{"a relative symlink is followed inside", "linkfile", Options{}, "inside", nil},
			{"a symlink to a directory on the way is followed inside", "linkdir/b/file", Options{}, "inside", nil},
			{"an absolute symlink resolves against the directory", "a/abs/b/file", Options{}, "decoy", nil},
			{"a relative symlink climbing out is clamped at the directory", "rel", Options{}, "decoy", nil},
			{"a chain of symlinks ending absolute stays inside", "c1", Options{}, "decoy", nil},
			{"dot-dot through a symlink is clamped at the directory", "updir" + tr.outside + "/b/file", Options{}, "decoy", nil},
			{"a lexical dot-dot is clamped at the directory", "../../a/b/file", Options{}, "inside", nil},
			{"a magic link through /proc is not followed", "magic", Options{}, "", unix.ENOENT},
			{"a symlink loop is an error", "loop1", Options{}, "", unix.ELOOP},
			{"a final symlink is not followed with O_NOFOLLOW", "linkfile", Options{Flags: unix.O_RDONLY | unix.O_NOFOLLOW}, "", unix.ELOOP},
			{"a symlink ending in a slash must reach a directory", "tofile", Options{}, "", unix.ENOTDIR},
			{"a missing file is not found", "nope", Options{}, "", unix.ENOENT},
			{"a file where a directory is wanted is refused", "linkfile", Options{Kind: Dir}, "", unix.ENOTDIR},
			{"a fifo where a regular file is wanted is refused without blocking", "a/fifo", Options{Kind: Regular}, "", unix.EINVAL},
			{"nothing is made", "new", Options{Kind: Dir, Make: MakeMissing}, "", unix.EINVAL},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				o := tt.o
				o.Walk = walk
				fd, err := OpenInRoot(tr.fd, tt.path, o)
				if tt.errno != nil {
					if err == nil {
						unix.Close(fd)
					}
					if !errors.Is(err, tt.errno) {
						t.Fatalf("err = %v, want %v", err, tt.errno)
					}
					return
				}
				must(t, err)
				defer unix.Close(fd)
				if p := where(t, fd); !within(tr.root, p) {
					t.Fatalf("opened %s, outside %s", p, tr.root)
				}
				if got := content(t, fd); got != tt.want {
					t.Fatalf("read %q, want %q", got, tt.want)
				}
			})
		}
		t.Run("a final symlink is opened itself with O_PATH|O_NOFOLLOW", func(t *testing.T) {
			fd, err := OpenInRoot(tr.fd, "linkfile", Options{Flags: unix.O_PATH | unix.O_NOFOLLOW, Walk: walk})
			must(t, err)
			defer unix.Close(fd)
			if !isLinkFd(fd) {
				t.Fatal("the descriptor is not of the link")
			}
		})
	})
}
