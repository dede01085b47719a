package beneath

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// tree is a directory to open paths beneath, with a directory beside it
// that no walk may reach.
type tree struct {
	root, outside string
	fd            int
}

// newTree lays out:
//
//	root/a/b/file     "inside"
//	root/a/fifo       a fifo
//	root/a/abs     -> outside (absolute)
//	root/file.txt
//	root/linkfile  -> a/b/file
//	root/linkdir   -> a
//	outside/b/file    "outside"
func newTree(t *testing.T) *tree {
	t.Helper()
	tr := &tree{root: t.TempDir(), outside: t.TempDir()}
	must(t, os.MkdirAll(filepath.Join(tr.root, "a/b"), 0o755))
	must(t, os.WriteFile(filepath.Join(tr.root, "a/b/file"), []byte("inside"), 0o644))
	must(t, unix.Mkfifo(filepath.Join(tr.root, "a/fifo"), 0o644))
	must(t, os.Symlink(tr.outside, filepath.Join(tr.root, "a/abs")))
	must(t, os.WriteFile(filepath.Join(tr.root, "file.txt"), []byte("top"), 0o644))
	must(t, os.Symlink("a/b/file", filepath.Join(tr.root, "linkfile")))
	must(t, os.Symlink("a", filepath.Join(tr.root, "linkdir")))
	must(t, os.MkdirAll(filepath.Join(tr.outside, "b"), 0o755))
	must(t, os.WriteFile(filepath.Join(tr.outside, "b/file"), []byte("outside"), 0o644))
	fd, err := unix.Open(tr.root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	must(t, err)
	t.Cleanup(func() { unix.Close(fd) })
	tr.fd = fd
	return tr
}

// resolvers runs f with the openat2 fast path and with the component walk.
func resolvers(t *testing.T, f func(t *testing.T, walk bool)) {
	for _, walk := range []bool{false, true} {
		name := "with openat2"
		if walk {
			name = "with the component walk"
		}
		t.Run(name, func(t *testing.T) {
			if !walk && !haveOpenat2() {
				t.Skip("openat2 is not available here")
			}
			f(t, walk)
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// where is the path the kernel gives for fd.
func where(t *testing.T, fd int) string {
	t.Helper()
	p, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	must(t, err)
	return p
}

// within reports whether p is dir or below it.
func within(dir, p string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// content reads what fd is open on through a fresh descriptor.
func content(t *testing.T, fd int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/fd/" + strconv.Itoa(fd))
	must(t, err)
	return string(b)
}

// wantErr checks err against the errno and component a case expects.
func wantErr(t *testing.T, err, errno error, component string) {
	t.Helper()
	if !errors.Is(err, errno) {
		t.Fatalf("err = %v, want %v", err, errno)
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v (%T), want an *Error", err, err)
	}
	if component != "" && e.Component != component {
		t.Fatalf("err = %v names %q, want %q", err, e.Component, component)
	}
	if errno == unix.ELOOP && !strings.Contains(err.Error(), "symbolic link "+component) {
		t.Fatalf("err = %q, want it to name the symbolic link %s", err, component)
	}
}

// opened checks what a case's open gave: a wanted error (false), or a
// descriptor, closed when the test ends (true).
func opened(t *testing.T, fd int, err, errno error, component string) bool {
	t.Helper()
	if errno != nil {
		if err == nil {
			unix.Close(fd)
		}
		wantErr(t, err, errno, component)
		return false
	}
	must(t, err)
	t.Cleanup(func() { unix.Close(fd) })
	return true
}

func TestOpen(t *testing.T) {
	tests := []struct {
		name      string
		path      string
		o         Options
		want      string // content read through the descriptor, or "" to skip
		errno     error
		component string
	}{
		{"a path of directories and a file opens", "a/b/file", Options{}, "inside", nil, ""},
		{"a leading slash is taken beneath the directory", "/a/b/file", Options{}, "inside", nil, ""},
		{"dot and empty components are skipped", "./a//b/./file", Options{}, "inside", nil, ""},
		{"the directory itself opens as a directory", ".", Options{Kind: Dir}, "", nil, ""},
		{"a regular file is opened as one", "a/b/file", Options{Kind: Regular}, "inside", nil, ""},
		{"a symlink as the last component is refused", "linkfile", Options{}, "", unix.ELOOP, "linkfile"},
		{"a symlink as the last component is refused with O_PATH too", "linkfile", Options{Flags: unix.O_PATH}, "", unix.ELOOP, "linkfile"},
		{"a symlink to a directory as the last component is refused", "linkdir", Options{Kind: Dir}, "", unix.ELOOP, "linkdir"},
		{"a symlink on the way is refused and named", "linkdir/b/file", Options{}, "", unix.ELOOP, "linkdir"},
		{"a symlink on the way is named as the path writes it", "/linkdir/b/file", Options{}, "", unix.ELOOP, "/linkdir"},
		{"an absolute symlink on the way never leads out", "a/abs/b/file", Options{}, "", unix.ELOOP, "a/abs"},
		{"dot-dot is refused", "a/../file.txt", Options{}, "", unix.EINVAL, ""},
		{"a missing component is not found and named", "a/nope/file", Options{}, "", unix.ENOENT, "a/nope"},
		{"a file on the way is not a directory", "file.txt/x", Options{}, "", unix.ENOTDIR, "file.txt"},
		{"a file where a directory is wanted is refused", "file.txt", Options{Kind: Dir}, "", unix.ENOTDIR, "file.txt"},
		{"a directory where a non-directory is wanted is refused", "a", Options{Kind: NonDir}, "", unix.EISDIR, "a"},
		{"a fifo where a regular file is wanted is refused without blocking", "a/fifo", Options{Kind: Regular}, "", unix.EINVAL, "a/fifo"},
		{"O_DIRECTORY in the flags asks for a directory", "a/b", Options{Flags: unix.O_RDONLY | unix.O_DIRECTORY}, "", nil, ""},
		{"O_DIRECTORY in the flags refuses a file", "file.txt", Options{Flags: unix.O_RDONLY | unix.O_DIRECTORY}, "", unix.ENOTDIR, "file.txt"},
		{"O_CREAT is refused: Make says what to make", "new", Options{Flags: unix.O_CREAT}, "", unix.EINVAL, ""},
		{"O_TMPFILE is refused", "a", Options{Flags: unix.O_TMPFILE | unix.O_RDWR}, "", unix.EINVAL, ""},
	}
	resolvers(t, func(t *testing.T, walk bool) {
		tr := newTree(t)
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				o := tt.o
				o.Walk = walk
				fd, err := Open(tr.fd, tt.path, o)
				if !opened(t, fd, err, tt.errno, tt.component) {
					return
				}
				if p := where(t, fd); !within(tr.root, p) {
					t.Fatalf("opened %s, outside %s", p, tr.root)
				}
				if tt.want != "" {
					if got := content(t, fd); got != tt.want {
						t.Fatalf("read %q, want %q", got, tt.want)
					}
				}
			})
		}
	})
}

func TestARegularFileIsReturnedBlockingUnlessAskedOtherwise(t *testing.T) {
	resolvers(t, func(t *testing.T, walk bool) {
		tr := newTree(t)
		for _, flags := range []int{unix.O_RDONLY, unix.O_RDONLY | unix.O_NONBLOCK} {
			fd, err := Open(tr.fd, "a/b/file", Options{Flags: flags, Kind: Regular, Walk: walk})
			must(t, err)
			fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
			unix.Close(fd)
			must(t, err)
			if got, want := fl&unix.O_NONBLOCK != 0, flags&unix.O_NONBLOCK != 0; got != want {
				t.Errorf("flags %#x: non-blocking = %v, want %v", flags, got, want)
			}
		}
	})
}

func TestOpenMakes(t *testing.T) {
	tests := []struct {
		name      string
		path      string
		o         Options
		made      []string // what Made must be told, in order
		perm      fs.FileMode
		errno     error
		component string
	}{
		{"missing directories are made, the last with Perm", "n1/n2/n3", Options{Kind: Dir, Make: MakeMissing, Perm: 0o750}, []string{"n1", "n1/n2", "n1/n2/n3"}, 0o750, nil, ""},
		{"a missing directory defaults to 0755", "/d1", Options{Kind: Dir, Make: MakeMissing}, []string{"/d1"}, 0o755, nil, ""},
		{"a missing file is made empty with Perm", "n4/f", Options{Kind: NonDir, Make: MakeMissing, Perm: 0o640}, []string{"n4", "n4/f"}, 0o640, nil, ""},
		{"a missing file defaults to 0644", "f2", Options{Kind: Regular, Make: MakeNew, Flags: unix.O_WRONLY}, []string{"f2"}, 0o644, nil, ""},
		{"an existing directory is opened as it is", "a/b", Options{Kind: Dir, Make: MakeMissing, Perm: 0o700}, nil, 0o755, nil, ""},
		{"an existing file is opened as it is", "file.txt", Options{Kind: NonDir, Make: MakeMissing}, nil, 0o644, nil, ""},
		{"MakeNew refuses what exists", "file.txt", Options{Kind: Regular, Make: MakeNew}, nil, 0, unix.EEXIST, "file.txt"},
		{"MakeNew refuses a symlink in the last place", "linkfile", Options{Kind: Regular, Make: MakeNew}, nil, 0, unix.ELOOP, "linkfile"},
		{"MakeMissing refuses a symlink in the last place", "linkdir", Options{Kind: Dir, Make: MakeMissing}, nil, 0, unix.ELOOP, "linkdir"},
		{"nothing is made through a symlink on the way", "linkdir/new/x", Options{Kind: Dir, Make: MakeMissing}, nil, 0, unix.ELOOP, "linkdir"},
		{"nothing is made through an absolute symlink", "a/abs/new", Options{Kind: Dir, Make: MakeMissing}, nil, 0, unix.ELOOP, "a/abs"},
		{"nothing is made below a file", "file.txt/new", Options{Kind: Dir, Make: MakeMissing}, nil, 0, unix.ENOTDIR, "file.txt"},
		{"a directory is not made where a file is", "file.txt", Options{Kind: Dir, Make: MakeMissing}, nil, 0, unix.ENOTDIR, "file.txt"},
		{"making needs to know what to make", "x", Options{Make: MakeMissing}, nil, 0, unix.EINVAL, ""},
	}
	resolvers(t, func(t *testing.T, walk bool) {
		tr := newTree(t)
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				o := tt.o
				o.Walk = walk
				var made []string
				o.Made = func(p string) { made = append(made, p) }
				fd, err := Open(tr.fd, tt.path, o)
				if opened(t, fd, err, tt.errno, tt.component) {
					var st unix.Stat_t
					must(t, unix.Fstat(fd, &st))
					if got := fs.FileMode(st.Mode & 0o777); got != tt.perm {
						t.Errorf("mode %v, want %v", got, tt.perm)
					}
					if p := where(t, fd); p != filepath.Join(tr.root, tt.path) {
						t.Errorf("opened %s, want %s", p, filepath.Join(tr.root, tt.path))
					}
				}
				if !slices.Equal(made, tt.made) {
					t.Errorf("Made was told %q, want %q", made, tt.made)
				}
				if n := countEntries(t, tr.outside); n != 2 {
					t.Errorf("the outside directory holds %d entries, want its 2", n)
				}
			})
		}
	})
}

// countEntries counts everything below dir.
func countEntries(t *testing.T, dir string) int {
	t.Helper()
	n := -1
	must(t, filepath.WalkDir(dir, func(string, fs.DirEntry, error) error { n++; return nil }))
	return n
}

func TestWhatIsMadeBelongsToTheParentOrTheOwnerGiven(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("giving files away needs root")
	}
	tests := []struct {
		name     string
		owner    *Owner
		uid, gid uint32
	}{
		{"a nil Owner means the directory it is made in", nil, 1234, 5678},
		{"an Owner gives its ids", &Owner{UID: 4321, GID: 4322}, 4321, 4322},
		{"an Owner of -1 keeps one id the process's", &Owner{UID: 4321, GID: -1}, 4321, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newTree(t)
			must(t, os.Chown(tr.root, 1234, 5678))
			for _, kind := range []Kind{Dir, NonDir} {
				p := "x/y" + strconv.Itoa(int(kind))
				fd, err := Open(tr.fd, p, Options{Kind: kind, Make: MakeMissing, Owner: tt.owner})
				must(t, err)
				unix.Close(fd)
				for _, q := range []string{"x", p} {
					var st unix.Stat_t
					must(t, unix.Lstat(filepath.Join(tr.root, q), &st))
					if st.Uid != tt.uid || st.Gid != tt.gid {
						t.Errorf("%s owned by %d:%d, want %d:%d", q, st.Uid, st.Gid, tt.uid, tt.gid)
					}
				}
			}
		})
	}
}

func TestOpenParent(t *testing.T) {
	tests := []struct {
		name      string
		path      string
		o         func(tr *tree) Options
		dir, base string // the parent's path below root, and the last name
		errno     error
		component string
	}{
		{"the parent and the last name are returned", "a/b/file", nil, "a/b", "file", nil, ""},
		{"a single name's parent is the directory itself", "/file.txt", nil, "", "file.txt", nil, ""},
		{"a missing last name is fine", "a/b/none", nil, "a/b", "none", nil, ""},
		{"the directory itself has no parent to open", ".", nil, "", "", unix.EINVAL, ""},
		{"an empty path has no parent to open", "", nil, "", "", unix.EINVAL, ""},
		{"dot-dot is refused", "a/..", nil, "", "", unix.EINVAL, ""},
		{"a symlink on the way is refused", "linkdir/b/file", nil, "", "", unix.ELOOP, "linkdir"},
		{"a missing parent is not found", "none/x", nil, "", "", unix.ENOENT, "none"},
		{"missing parents are made when asked", "m1/m2/x", func(*tree) Options { return Options{Make: MakeNew} }, "m1/m2", "x", nil, ""},
		{"the expected directory passes", "a/b/file", func(tr *tree) Options { return Options{Expect: identity(t, tr.root)} }, "a/b", "file", nil, ""},
		{"another directory than the one expected is refused", "a/b/file", func(tr *tree) Options { return Options{Expect: identity(t, tr.outside)} }, "", "", unix.ESTALE, ""},
	}
	resolvers(t, func(t *testing.T, walk bool) {
		tr := newTree(t)
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				var o Options
				if tt.o != nil {
					o = tt.o(tr)
				}
				o.Walk = walk
				fd, base, err := OpenParent(tr.fd, tt.path, o)
				if !opened(t, fd, err, tt.errno, tt.component) {
					if e := (*Error)(nil); errors.As(err, &e) && e.Path != tt.path {
						t.Errorf("err = %v names the path %q, want %q", err, e.Path, tt.path)
					}
					return
				}
				if p, want := where(t, fd), filepath.Join(tr.root, tt.dir); p != want || base != tt.base {
					t.Fatalf("OpenParent = %s, %q; want %s, %q", p, base, want, tt.base)
				}
			})
		}
	})
}

func identity(t *testing.T, dir string) Identity {
	t.Helper()
	var st unix.Stat_t
	must(t, unix.Stat(dir, &st))
	return Identity{Dev: st.Dev, Ino: st.Ino}
}

func TestOpenPath(t *testing.T) {
	tr := newTree(t)
	linked := filepath.Join(t.TempDir(), "link")
	must(t, os.Symlink(tr.root, linked))
	tests := []struct {
		name      string
		path      string
		errno     error
		component string
	}{
		{"an absolute path without links opens", filepath.Join(tr.root, "a/b/file"), nil, ""},
		{"a relative path is refused", "a/b/file", unix.EINVAL, ""},
		{"a link in the last component is refused", filepath.Join(tr.root, "linkfile"), unix.ELOOP, filepath.Join(tr.root, "linkfile")},
		{"a link anywhere in the path is refused", filepath.Join(linked, "a/b/file"), unix.ELOOP, linked},
	}
	resolvers(t, func(t *testing.T, walk bool) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				fd, err := OpenPath(tt.path, Options{Kind: Regular, Walk: walk})
				if !opened(t, fd, err, tt.errno, tt.component) {
					return
				}
				if got := content(t, fd); got != "inside" {
					t.Fatalf("read %q", got)
				}
			})
		}
	})
}

func TestErrorsSayWhatWasRefusedAndWhere(t *testing.T) {
	tr := newTree(t)
	tests := []struct {
		name, path string
		o          Options
		want       string
	}{
		{"a link on the way", "/linkdir/b/file", Options{}, "/linkdir/b/file goes through the symbolic link /linkdir; refusing"},
		{"a link as the last component", "linkfile", Options{}, "refusing the symbolic link linkfile"},
		{"a missing component", "a/nope/file", Options{}, "a/nope does not exist"},
		{"a file on the way", "file.txt/x", Options{}, "file.txt is not a directory"},
		{"a fifo for a regular file", "a/fifo", Options{Kind: Regular}, "a/fifo is a fifo, not a regular file"},
		{"a dot-dot", "a/../b", Options{}, `".." is refused`},
		{"something to make without a kind", "x", Options{Make: MakeMissing}, "Make needs a Kind"},
		{"a directory other than expected", "a", Options{Expect: Identity{Dev: 1, Ino: 1}}, "no longer the one expected"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fd, err := Open(tr.fd, tt.path, tt.o)
			if err == nil {
				unix.Close(fd)
				t.Fatal("opened")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %q, want it to say %q", err, tt.want)
			}
		})
	}
}
