package fsmode

import (
	"io/fs"
	"testing"

	"golang.org/x/sys/unix"
)

func TestFromStatKeepsTypeAndSpecialBits(t *testing.T) {
	tests := []struct {
		raw  uint32
		want fs.FileMode
		name string
	}{
		{unix.S_IFREG | 0o644, 0o644, "regular file"},
		{unix.S_IFDIR | 0o755, fs.ModeDir | 0o755, "directory"},
		{unix.S_IFLNK | 0o777, fs.ModeSymlink | 0o777, "symlink"},
		{unix.S_IFIFO | 0o600, fs.ModeNamedPipe | 0o600, "fifo"},
		{unix.S_IFSOCK | 0o600, fs.ModeSocket | 0o600, "socket"},
		{unix.S_IFCHR | 0o666, fs.ModeDevice | fs.ModeCharDevice | 0o666, "character device"},
		{unix.S_IFBLK | 0o660, fs.ModeDevice | 0o660, "block device"},
		{unix.S_IFREG | unix.S_ISUID | 0o755, fs.ModeSetuid | 0o755, "regular file"},
		{unix.S_IFDIR | unix.S_ISVTX | 0o777, fs.ModeDir | fs.ModeSticky | 0o777, "directory"},
		{0o170000&^unix.S_IFMT | 0o644, fs.ModeIrregular | 0o644, "special file"},
	}
	for _, tt := range tests {
		got := FromStat(tt.raw)
		if got != tt.want {
			t.Errorf("FromStat(%o) = %v, want %v", tt.raw, got, tt.want)
		}
		if d := Describe(got); d != tt.name {
			t.Errorf("Describe(%v) = %q, want %q", got, d, tt.name)
		}
	}
}
