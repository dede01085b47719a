package wsfs

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
)

const hostSecret = "HOST-SECRET"

// fixture is a root directory with a "host" directory beside it holding a
// secret, and a decoy copy of the host path inside the root: a correct
// resolution of an absolute link lands on the decoy, never on the host.
type fixture struct {
	root, host string
	r          *Root
}

// resolvers runs f once with openat2 and once with the fallback walk.
func resolvers(t *testing.T, f func(t *testing.T, fx *fixture)) {
	for _, walk := range []bool{false, true} {
		name := "with openat2"
		if walk {
			name = "with the component walk fallback"
		}
		t.Run(name, func(t *testing.T) {
			fx := newFixture(t)
			fx.r.walk = walk // where openat2 is missing, both runs walk
			f(t, fx)
		})
	}
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	fx := &fixture{root: t.TempDir(), host: t.TempDir()}
	must(t, os.WriteFile(filepath.Join(fx.host, "secret"), []byte(hostSecret), 0o644))
	decoy := filepath.Join(fx.root, fx.host)
	must(t, os.MkdirAll(decoy, 0o755))
	must(t, os.WriteFile(filepath.Join(decoy, "secret"), []byte("INSIDE"), 0o644))
	must(t, os.WriteFile(filepath.Join(fx.root, "inside.txt"), []byte("INSIDE"), 0o644))
	r, err := Open(fx.root)
	must(t, err)
	t.Cleanup(func() { r.Close() })
	fx.r = r
	return fx
}

func (fx *fixture) link(t *testing.T, name, target string) {
	t.Helper()
	p := filepath.Join(fx.root, name)
	must(t, os.MkdirAll(filepath.Dir(p), 0o755))
	must(t, os.Symlink(target, p))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestReadFileStaysInsideTheRoot(t *testing.T) {
	resolvers(t, func(t *testing.T, fx *fixture) {
		fx.link(t, "abs", filepath.Join(fx.host, "secret"))
		fx.link(t, "rel", strings.Repeat("../", 20)+strings.TrimPrefix(fx.host, "/")+"/secret")
		fx.link(t, "c1", "c2")
		fx.link(t, "c2", "sub/c3")
		fx.link(t, "sub/c3", filepath.Join(fx.host, "secret"))
		fx.link(t, "dir", fx.host)
		fx.link(t, "updir", "sub/../../../..")
		fx.link(t, "magic", "/proc/self/root"+fx.host+"/secret")
		fx.link(t, "loop1", "loop2")
		fx.link(t, "loop2", "loop1")
		tests := []struct {
			name string
			path string
			want string // content, when the read succeeds inside the root
			kind error  // else the error kind
		}{
			{"an absolute symlink resolves against the root", "abs", "INSIDE", nil},
			{"a relative symlink climbing out is clamped at the root", "rel", "INSIDE", nil},
			{"a chain of symlinks ending absolute stays inside", "c1", "INSIDE", nil},
			{"a symlink to a host directory resolves inside", "dir/secret", "INSIDE", nil},
			{"dot-dot through a symlink is clamped at the root", "updir" + fx.host + "/secret", "INSIDE", nil},
			{"a lexical dot-dot escape is refused", "../../etc/passwd", "", sandbox.ErrPathEscape},
			{"a dot-dot after a directory escape is refused", "sub/../../x", "", sandbox.ErrPathEscape},
			{"an absolute path is refused", "/etc/passwd", "", sandbox.ErrPathEscape},
			{"a magic link through /proc is not followed", "magic", "", sandbox.ErrNotFound},
			{"a symlink loop is an error", "loop1", "", sandbox.ErrInvalid},
			{"a missing file is not found", "nope", "", sandbox.ErrNotFound},
			{"a directory is not a regular file", "sub", "", sandbox.ErrInvalid},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got, err := fx.r.ReadFile(tt.path, 0)
				if bytes.Contains(got, []byte(hostSecret)) {
					t.Fatalf("read %q returned the host file's content", tt.path)
				}
				if tt.kind != nil {
					if !errors.Is(err, tt.kind) {
						t.Fatalf("read %q: err = %v, want kind %v", tt.path, err, tt.kind)
					}
					return
				}
				if err != nil || string(got) != tt.want {
					t.Fatalf("read %q = %q, %v; want %q", tt.path, got, err, tt.want)
				}
			})
		}
	})
}

func TestNotFoundWrapsTheErrno(t *testing.T) {
	resolvers(t, func(t *testing.T, fx *fixture) {
		_, err := fx.r.ReadFile("missing/file", 0)
		if !errors.Is(err, sandbox.ErrNotFound) || !errors.Is(err, fs.ErrNotExist) || !errors.Is(err, unix.ENOENT) {
			t.Fatalf("err = %v, want ErrNotFound wrapping ENOENT", err)
		}
	})
}

func TestReadFileLimit(t *testing.T) {
	resolvers(t, func(t *testing.T, fx *fixture) {
		must(t, os.WriteFile(filepath.Join(fx.root, "hundred"), bytes.Repeat([]byte("x"), 100), 0o644))
		tests := []struct {
			name    string
			max     int64
			wantErr bool
		}{
			{"no limit reads everything", 0, false},
			{"a limit equal to the size reads everything", 100, false},
			{"a limit below the size is an output-limit error", 99, true},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got, err := fx.r.ReadFile("hundred", tt.max)
				if tt.wantErr {
					if !errors.Is(err, sandbox.ErrOutputLimit) || got != nil {
						t.Fatalf("got %d bytes, err %v; want ErrOutputLimit and nothing", len(got), err)
					}
					return
				}
				if err != nil || len(got) != 100 {
					t.Fatalf("got %d bytes, err %v", len(got), err)
				}
			})
		}
	})
}

func TestReadFileOfAFIFODoesNotHang(t *testing.T) {
	resolvers(t, func(t *testing.T, fx *fixture) {
		must(t, unix.Mkfifo(filepath.Join(fx.root, "fifo"), 0o644))
		done := make(chan error, 1)
		go func() { _, err := fx.r.ReadFile("fifo", 0); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, sandbox.ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("reading a FIFO hung")
		}
	})
}

func TestWriteFile(t *testing.T) {
	resolvers(t, func(t *testing.T, fx *fixture) {
		fx.link(t, "wlink", filepath.Join(fx.host, "target"))
		fx.link(t, "dir", fx.host)
		must(t, os.Mkdir(filepath.Join(fx.root, "adir"), 0o755))
		tests := []struct {
			name   string
			path   string
			mode   fs.FileMode
			onDisk string // host path (under root) that must hold the data
			kind   error
		}{
			{"a new file is written with its mode", "new.txt", 0o640, "new.txt", nil},
			{"missing parent directories are created", "a/b/c.txt", 0o600, "a/b/c.txt", nil},
			{"an existing file is replaced", "inside.txt", 0o644, "inside.txt", nil},
			{"zero mode means 0644", "zero.txt", 0, "zero.txt", nil},
			{"a file under a symlinked host dir lands inside the root", "dir/new", 0o644, filepath.Join(fx.host, "new"), nil},
			{"writing through a symlink is refused", "wlink", 0o644, "", sandbox.ErrPathEscape},
			{"writing over a directory is refused", "adir", 0o644, "", sandbox.ErrInvalid},
			{"writing outside the root is refused", "../out", 0o644, "", sandbox.ErrPathEscape},
			{"writing the root itself is refused", ".", 0o644, "", sandbox.ErrInvalid},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				err := fx.r.WriteFile(tt.path, []byte("DATA"), tt.mode, -1, -1)
				if tt.kind != nil {
					if !errors.Is(err, tt.kind) {
						t.Fatalf("err = %v, want %v", err, tt.kind)
					}
					return
				}
				must(t, err)
				p := filepath.Join(fx.root, tt.onDisk)
				got, err := os.ReadFile(p)
				if err != nil || string(got) != "DATA" {
					t.Fatalf("%s holds %q, %v", p, got, err)
				}
				want := tt.mode
				if want == 0 {
					want = 0o644
				}
				if st, _ := os.Stat(p); st.Mode().Perm() != want {
					t.Fatalf("mode %v, want %v", st.Mode().Perm(), want)
				}
			})
		}
		for _, name := range []string{"target", "new"} {
			if _, err := os.Lstat(filepath.Join(fx.host, name)); err == nil {
				t.Fatalf("host file %s was created outside the root", name)
			}
		}
		entries, _ := os.ReadDir(fx.root)
		for _, e := range entries {
			if strings.Contains(e.Name(), ".agentbox-") {
				t.Fatalf("temporary file %s left behind", e.Name())
			}
		}
	})
}

func TestWriteFileSetsTheOwner(t *testing.T) {
	testenv.NeedRoot(t, "changing file ownership")
	resolvers(t, func(t *testing.T, fx *fixture) {
		must(t, fx.r.WriteFile("owned/deep/f", []byte("x"), 0o644, 1234, 4321))
		for _, p := range []string{"owned", "owned/deep", "owned/deep/f"} {
			var st unix.Stat_t
			must(t, unix.Lstat(filepath.Join(fx.root, p), &st))
			if st.Uid != 1234 || st.Gid != 4321 {
				t.Fatalf("%s owned by %d:%d, want 1234:4321", p, st.Uid, st.Gid)
			}
		}
	})
}

func TestMkdirAllStatRemove(t *testing.T) {
	resolvers(t, func(t *testing.T, fx *fixture) {
		fx.link(t, "dir", fx.host)
		must(t, fx.r.MkdirAll("dir/x/y", 0o750, -1, -1))
		if _, err := os.Stat(filepath.Join(fx.host, "x")); err == nil {
			t.Fatal("MkdirAll through a symlink created a host directory")
		}
		fi, err := fx.r.Stat("dir/x/y")
		if err != nil || !fi.IsDir || fi.Mode.Perm() != 0o750 {
			t.Fatalf("stat = %+v, %v", fi, err)
		}
		must(t, fx.r.MkdirAll("dir/x/y", 0, -1, -1)) // existing is fine
		if err := fx.r.MkdirAll("inside.txt/sub", 0, -1, -1); !errors.Is(err, sandbox.ErrInvalid) {
			t.Fatalf("mkdir under a file: err = %v, want ErrInvalid", err)
		}

		fi, err = fx.r.Stat("dir")
		if err != nil || fi.Mode&fs.ModeSymlink == 0 || fi.Target != fx.host {
			t.Fatalf("stat of a symlink = %+v, %v; want the link with its target", fi, err)
		}
		if fi, err := fx.r.Stat("."); err != nil || !fi.IsDir {
			t.Fatalf("stat of the root = %+v, %v", fi, err)
		}
		must(t, fx.r.Remove("dir"))
		if _, err := os.Stat(filepath.Join(fx.host, "secret")); err != nil {
			t.Fatal("removing a symlink removed its target")
		}
		if err := fx.r.Remove("dir"); !errors.Is(err, sandbox.ErrNotFound) {
			t.Fatalf("second remove: err = %v, want ErrNotFound", err)
		}
		must(t, fx.r.Remove(strings.TrimPrefix(fx.host, "/")+"/secret"))
		if err := fx.r.Remove("."); !errors.Is(err, sandbox.ErrInvalid) {
			t.Fatalf("removing the root: err = %v", err)
		}
	})
}

func TestListDir(t *testing.T) {
	resolvers(t, func(t *testing.T, fx *fixture) {
		must(t, os.Mkdir(filepath.Join(fx.root, "d"), 0o755))
		must(t, os.WriteFile(filepath.Join(fx.root, "d", "b.txt"), []byte("bb"), 0o600))
		must(t, os.Mkdir(filepath.Join(fx.root, "d", "c"), 0o700))
		fx.link(t, "d/a", "/etc/passwd")
		got, err := fx.r.ListDir("d")
		must(t, err)
		if len(got) != 3 {
			t.Fatalf("got %d entries: %+v", len(got), got)
		}
		want := []struct {
			name   string
			size   int64
			isDir  bool
			perm   fs.FileMode
			target string
		}{
			{"a", int64(len("/etc/passwd")), false, 0o777, "/etc/passwd"},
			{"b.txt", 2, false, 0o600, ""},
			{"c", -1, true, 0o700, ""},
		}
		for i, w := range want {
			g := got[i]
			if g.Name != w.name || g.IsDir != w.isDir || g.Mode.Perm() != w.perm || g.Target != w.target || (w.size >= 0 && g.Size != w.size) {
				t.Errorf("entry %d = %+v, want %+v", i, g, w)
			}
		}
		fx.link(t, "dl", "/")
		// A symlink to "/" lists the root itself, not the host's root.
		got, err = fx.r.ListDir("dl")
		must(t, err)
		for _, e := range got {
			if e.Name == "etc" || e.Name == "proc" {
				t.Fatalf("listing a link to / showed the host root (%s)", e.Name)
			}
		}
		if _, err := fx.r.ListDir("inside.txt"); !errors.Is(err, sandbox.ErrInvalid) {
			t.Fatalf("listing a file: err = %v", err)
		}
	})
}

func TestClosedRootRefusesEverything(t *testing.T) {
	fx := newFixture(t)
	must(t, fx.r.Close())
	must(t, fx.r.Close())
	if _, err := fx.r.ReadFile("inside.txt", 0); !errors.Is(err, sandbox.ErrClosed) {
		t.Fatalf("read after close: err = %v", err)
	}
	if err := fx.r.WriteFile("x", nil, 0, -1, -1); !errors.Is(err, sandbox.ErrClosed) {
		t.Fatalf("write after close: err = %v", err)
	}
}

func TestOpenOfAMissingDirectoryIsNotFound(t *testing.T) {
	if _, err := Open(filepath.Join(t.TempDir(), "none")); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("err = %v", err)
	}
}

// TestRacingSymlinkSwapNeverReadsTheHost plays a sandboxed process that
// flips a file link and a directory link between an inside target and the
// host secret while the host reads through them.
func TestRacingSymlinkSwapNeverReadsTheHost(t *testing.T) {
	resolvers(t, func(t *testing.T, fx *fixture) {
		// Remove the decoy so that an absolute link has nothing to land on
		// inside: a correct read gets "INSIDE" or an error, never the host.
		must(t, os.RemoveAll(filepath.Join(fx.root, strings.Split(strings.TrimPrefix(fx.host, "/"), "/")[0])))
		must(t, os.Mkdir(filepath.Join(fx.root, "in"), 0o755))
		must(t, os.WriteFile(filepath.Join(fx.root, "in", "secret"), []byte("INSIDE"), 0o644))
		fileTargets := []string{"inside.txt", filepath.Join(fx.host, "secret"), strings.Repeat("../", 10) + strings.TrimPrefix(fx.host, "/") + "/secret"}
		dirTargets := []string{"in", fx.host, "../../../../" + strings.TrimPrefix(fx.host, "/")}
		fx.link(t, "f", fileTargets[0])
		fx.link(t, "d", dirTargets[0])

		var stop atomic.Bool
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				for _, l := range []struct {
					name    string
					targets []string
				}{{"f", fileTargets}, {"d", dirTargets}} {
					tmp := filepath.Join(fx.root, l.name+".new")
					_ = os.Remove(tmp)
					if os.Symlink(l.targets[i%len(l.targets)], tmp) == nil {
						_ = os.Rename(tmp, filepath.Join(fx.root, l.name))
					}
				}
			}
		}()
		deadline := time.Now().Add(300 * time.Millisecond)
		reads, inside := 0, 0
		for time.Now().Before(deadline) {
			for _, p := range []string{"f", "d/secret"} {
				got, err := fx.r.ReadFile(p, 0)
				reads++
				if bytes.Contains(got, []byte(hostSecret)) {
					stop.Store(true)
					wg.Wait()
					t.Fatalf("read %q returned the host secret during a symlink swap", p)
				}
				if err == nil {
					inside++
				}
			}
		}
		stop.Store(true)
		wg.Wait()
		if inside == 0 {
			t.Fatalf("none of %d reads succeeded: the test did not exercise the inside target", reads)
		}
		t.Logf("%d reads, %d inside, none reached the host", reads, inside)
	})
}

func TestConcurrentUseAndCloseAreSafe(t *testing.T) {
	fx := newFixture(t)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 50 {
				name := filepath.Join("c", strings.Repeat("x", i+1), "f")
				err := fx.r.WriteFile(name, []byte{byte(j)}, 0o644, -1, -1)
				if err == nil {
					_, err = fx.r.ReadFile(name, 0)
				}
				if err == nil {
					_, err = fx.r.ListDir("c")
				}
				if err != nil && !errors.Is(err, sandbox.ErrClosed) {
					errs <- err
					return
				}
				if j == 25 && i == 0 {
					fx.r.Close()
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent use: %v", err)
	}
}
