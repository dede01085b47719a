package escapetest

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestWritingOutsideTheWorkspaceFails(t *testing.T) {
	name := fmt.Sprintf("agentbox-escapetest-%d", time.Now().UnixNano())
	// Host files the sandbox sees (or sees a copy of) at the same path,
	// to overwrite; their host content must not change.
	overwrite := []string{"/etc/passwd", "/etc/hosts", "/usr/bin/env", "/bin/sh", "/etc/ssl/certs/ca-certificates.crt"}
	before := map[string][32]byte{}
	for _, p := range overwrite {
		if b, err := os.ReadFile(p); err == nil {
			before[p] = sha256.Sum256(b)
		}
	}
	// A planted host marker in the host's /tmp, which the sandbox's /tmp
	// tmpfs hides.
	markerDir, err := os.MkdirTemp("", "agentbox-escapetest-marker-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(markerDir) })
	os.Chmod(markerDir, 0o777)
	marker := filepath.Join(markerDir, "marker")
	if err := os.WriteFile(marker, []byte("host"), 0o666); err != nil {
		t.Fatal(err)
	}

	// Directories that look writable: each gets a new file, created from
	// inside through the path given; host is where it would land on the
	// host if the write escaped.
	dirs := []struct{ inside, host string }{
		{"/", "/"}, {"/usr", "/usr"}, {"/usr/bin", "/usr/bin"}, {"/usr/local/bin", "/usr/local/bin"},
		{"/etc", "/etc"}, {"/bin", "/bin"}, {"/sbin", "/sbin"}, {"/lib", "/lib"}, {"/var", "/var"},
		{"/var/tmp", "/var/tmp"}, {"/root", "/root"}, {"/home", "/home"}, {"/opt", "/opt"}, {"/mnt", "/mnt"},
		{"/srv", "/srv"}, {"/run", "/run"}, {"/dev", "/dev"}, {"/proc", "/proc"},
		{"/proc/1/root/etc", "/etc"}, {"/proc/self/root/usr", "/usr"}, {"/workspace/../etc", "/etc"},
		{helperDir, hostHelperDir},
	}
	for _, who := range bothUsers(t) {
		t.Run(who.name, func(t *testing.T) {
			var list [][]string
			for _, d := range dirs {
				list = append(list, []string{"write", d.inside + "/" + name, "pwned"})
			}
			for _, p := range overwrite {
				list = append(list, []string{"write", p, "pwned"})
			}
			results := batch(t, who.s, list)
			for i, d := range dirs {
				t.Run("a new file in "+d.inside, func(t *testing.T) {
					hostPath := filepath.Join(d.host, name)
					if _, err := os.Lstat(hostPath); err == nil {
						os.Remove(hostPath)
						t.Fatalf("ESCAPE: writing %s/%s from inside created the host's %s", d.inside, name, hostPath)
					}
					results[i].Failed(t)
				})
			}
			for i, p := range overwrite {
				t.Run("overwriting "+p, func(t *testing.T) {
					results[len(dirs)+i].Failed(t)
				})
			}
			// The sandbox's own /tmp and /dev/shm are writable tmpfs: a
			// write there must stay there.
			for _, d := range []string{"/tmp", "/dev/shm"} {
				t.Run("a new file in "+d+" stays in the sandbox", func(t *testing.T) {
					if got, out := attack(t, who.s, "write", d+"/"+name, "pwned"); got != "ok" {
						t.Fatalf("the sandbox's %s is not writable:\n%s", d, out)
					}
					if _, err := os.Lstat(filepath.Join(d, name)); err == nil {
						os.Remove(filepath.Join(d, name))
						t.Fatalf("ESCAPE: a file written in the sandbox's %s appeared in the host's", d)
					}
				})
			}
			t.Run("the planted host marker in /tmp", func(t *testing.T) {
				r := sh(t, who.s, "mkdir -p "+markerDir+" && echo pwned > "+marker+" && cat "+marker)
				t.Logf("inside: exit %d, %q", r.ExitCode, r.Stdout)
				if b, _ := os.ReadFile(marker); string(b) != "host" {
					t.Fatalf("ESCAPE: the host's %s now holds %q", marker, b)
				}
			})
		})
	}
	for _, p := range overwrite {
		if want, ok := before[p]; ok {
			b, _ := os.ReadFile(p)
			if sha256.Sum256(b) != want {
				t.Errorf("ESCAPE: the host's %s changed", p)
			}
		}
	}
	for _, d := range dirs {
		if strings.HasPrefix(d.host, "/proc") {
			continue
		}
		if _, err := os.Lstat(filepath.Join(d.host, name)); err == nil {
			t.Errorf("ESCAPE: %s exists on the host", filepath.Join(d.host, name))
		}
	}
}

// readOnlyFixture is a host tree to mount read-only: owned by the sandbox
// user and world-writable, so that only the read-only mount stops writes.
type readOnlyFixture struct {
	dir   string
	files map[string]fileState
}

type fileState struct {
	data  []byte
	mode  os.FileMode
	mtime time.Time
}

// newReadOnlyFixture makes the tree at dir (which must not exist yet).
func newReadOnlyFixture(t *testing.T, dir string) *readOnlyFixture {
	t.Helper()
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	f := &readOnlyFixture{dir: dir}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o777); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"input.csv", "sub/nested.txt"} {
		if err := os.WriteFile(filepath.Join(dir, p), []byte("original "+p+"\n"), 0o666); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{".", "sub", "input.csv", "sub/nested.txt"} {
		full := filepath.Join(dir, p)
		// Owned by the sandbox user, so that only the mount stops a
		// write (rootless, that user is this process's already).
		if !rootless() {
			if err := os.Chown(full, 1000, 1000); err != nil {
				t.Fatal(err)
			}
		}
		fi, _ := os.Stat(full)
		if err := os.Chmod(full, fi.Mode().Perm()|0o666); err != nil {
			t.Fatal(err)
		}
		if fi.IsDir() {
			os.Chmod(full, 0o777)
		}
	}
	f.files = f.snapshot(t)
	return f
}

// snapshot records every entry of the tree: content, mode, mtime.
func (f *readOnlyFixture) snapshot(t *testing.T) map[string]fileState {
	t.Helper()
	out := map[string]fileState{}
	err := filepath.Walk(f.dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(f.dir, p)
		st := fileState{mode: fi.Mode(), mtime: fi.ModTime()}
		if fi.Mode().IsRegular() {
			st.data, _ = os.ReadFile(p)
		}
		out[rel] = st
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// assertUnchanged fails when the host tree differs from when it was made.
func (f *readOnlyFixture) assertUnchanged(t *testing.T) {
	t.Helper()
	now := f.snapshot(t)
	for rel, was := range f.files {
		is, ok := now[rel]
		switch {
		case !ok:
			t.Errorf("ESCAPE: the host's read-only %s was removed", rel)
		case !bytes.Equal(is.data, was.data):
			t.Errorf("ESCAPE: the host's read-only %s changed to %q", rel, is.data)
		case is.mode != was.mode:
			t.Errorf("ESCAPE: the host's read-only %s changed mode %v -> %v", rel, was.mode, is.mode)
		case !is.mtime.Equal(was.mtime):
			t.Errorf("ESCAPE: the host's read-only %s changed mtime", rel)
		}
	}
	for rel := range now {
		if _, ok := f.files[rel]; !ok {
			t.Errorf("ESCAPE: %s appeared in the host's read-only tree", rel)
		}
	}
}
