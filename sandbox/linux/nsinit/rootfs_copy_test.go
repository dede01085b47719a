package nsinit

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// The sandbox's /etc copies keep the host file's bytes; what is not a
// regular file counts as missing (and is left out of /etc).
func TestCopyHostFile(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	want := make([]byte, 200<<10)
	for i := range want {
		want[i] = byte(i * 7)
	}
	if err := os.WriteFile(src, want, 0o600); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "dst")
	if err := copyHostFile(src, dst); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(dst)
	if err != nil || string(got) != string(want) {
		t.Fatalf("copy differs (%d bytes, want %d; %v)", len(got), len(want), err)
	}
	if fi, _ := os.Stat(dst); fi.Mode().Perm() != 0o644 {
		t.Errorf("copy has mode %s, want 0644", fi.Mode().Perm())
	}
	if err := copyHostFile(dir, filepath.Join(dir, "d2")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("copy of a directory: %v, want one that counts as missing", err)
	}
	if err := copyHostFile(filepath.Join(dir, "none"), filepath.Join(dir, "d3")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("copy of a missing file: %v, want os.ErrNotExist", err)
	}
	if err := copyHostFile("/proc/self/status", filepath.Join(dir, "status")); err != nil {
		t.Errorf("copy of a file that claims no size: %v", err)
	} else if b, _ := os.ReadFile(filepath.Join(dir, "status")); len(b) == 0 {
		t.Error("a file that claims no size was copied empty")
	}
}
