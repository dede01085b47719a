// Package atfile holds the small descriptor-relative helpers that every
// package walking an untrusted tree by file descriptor needs (manifest,
// artifact, snapshot, wsfs): no path is ever resolved from the root again.
package atfile

import (
	"os"
	"slices"

	"golang.org/x/sys/unix"
)

// MaxLink bounds a symlink target read by Readlink; the kernel's own
// limit is PATH_MAX (4096), so a longer answer means something is wrong.
const MaxLink = 1 << 16

// Readlink reads the target of the symlink name under the directory
// descriptor dir (name "" reads the link dir itself refers to, for an
// O_PATH|O_NOFOLLOW descriptor). A target is never cut short: the buffer
// grows until it fits, up to MaxLink, past which it is ENAMETOOLONG.
func Readlink(dir int, name string) (string, error) {
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(dir, name, buf)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
		if size >= MaxLink {
			return "", unix.ENAMETOOLONG
		}
	}
}

// Names lists the directory open at dir, sorted. It reads through a fresh
// descriptor of ".", so dir's own offset is left alone and dir stays open.
func Names(dir int) ([]string, error) {
	fd, err := unix.Openat(dir, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), ".")
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	return names, nil
}
