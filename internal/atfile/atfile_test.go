package atfile

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func openDir(t *testing.T, dir string) int {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

func TestReadlinkReturnsLongTargetsWhole(t *testing.T) {
	dir := t.TempDir()
	long := strings.Repeat("a/", 2000) + "end" // 4003 bytes: past any small first buffer
	if err := os.Symlink(long, filepath.Join(dir, "l")); err != nil {
		t.Fatal(err)
	}
	got, err := Readlink(openDir(t, dir), "l")
	if err != nil || got != long {
		t.Fatalf("Readlink = %d bytes, %v; want the %d-byte target", len(got), err, len(long))
	}
	if _, err := Readlink(openDir(t, dir), "missing"); !errors.Is(err, unix.ENOENT) {
		t.Fatalf("Readlink of a missing name: %v, want ENOENT", err)
	}
}

func TestNamesAreSortedAndLeaveTheDescriptorUsable(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"b", "c", "a"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fd := openDir(t, dir)
	for range 2 { // twice: the first listing must not use up fd's offset
		got, err := Names(fd)
		if err != nil || !slices.Equal(got, []string{"a", "b", "c"}) {
			t.Fatalf("Names = %v, %v", got, err)
		}
	}
}
