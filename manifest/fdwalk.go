package manifest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/fsmode"
)

// The helpers here walk paths one component at a time from a directory
// descriptor with O_NOFOLLOW, so that a symlink swapped into a path after
// validation makes the open fail (ELOOP or ENOTDIR) instead of sending the
// copy somewhere else. Every descriptor is O_CLOEXEC.
//
// sandbox/wsfs confines paths the same way, but works on whole files in
// memory and replaces destinations atomically; copying trees of any size
// needs streaming descriptor-to-descriptor copies into files created
// exclusively (O_EXCL), so materialization walks descriptors itself.

const (
	dirFlags  = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fileFlags = unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC
)

// openDirNoFollow opens an absolute, already resolved directory path
// without following any symlink in it.
func openDirNoFollow(p string) (int, error) {
	if !filepath.IsAbs(p) {
		return -1, fmt.Errorf("open %s: not an absolute path", p)
	}
	fd, err := unix.Open("/", dirFlags, 0)
	if err != nil {
		return -1, fmt.Errorf("open /: %w", err)
	}
	for _, c := range strings.Split(strings.Trim(filepath.Clean(p), "/"), "/") {
		if c == "" {
			continue
		}
		next, err := unix.Openat(fd, c, dirFlags, 0)
		unix.Close(fd)
		if err != nil {
			return -1, fmt.Errorf("open %s without following links: at %q: %w", p, c, noFollowErr(err))
		}
		fd = next
	}
	return fd, nil
}

// openFileNoFollow opens a regular file by absolute, resolved path without
// following links, and checks through fstat that it is a regular file.
func openFileNoFollow(p string) (*os.File, error) {
	dir, err := openDirNoFollow(filepath.Dir(p))
	if err != nil {
		return nil, err
	}
	defer unix.Close(dir)
	return openRegularAt(dir, filepath.Base(p), p)
}

// openRegularAt opens name under dir for reading and checks by fstat that
// what was opened is a regular file (O_NONBLOCK keeps a fifo swapped in
// from blocking the open).
func openRegularAt(dir int, name, display string) (*os.File, error) {
	fd, err := unix.Openat(dir, name, fileFlags, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s without following links: %w", display, noFollowErr(err))
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("fstat %s: %w", display, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, fmt.Errorf("open %s: it is a %s now, not a regular file (changed since validation?)", display, fsmode.Describe(fsmode.FromStat(st.Mode)))
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("open %s: %w", display, err)
	}
	return os.NewFile(uintptr(fd), display), nil
}

// noFollowErr explains ELOOP, which is what O_NOFOLLOW reports for a link.
func noFollowErr(err error) error {
	if errors.Is(err, unix.ELOOP) {
		return fmt.Errorf("%w (a symlink where none was expected)", err)
	}
	return err
}

// owner is who created files belong to; a negative id is left as is.
type owner struct{ uid, gid int }

// apply fchowns fd unless it already has the wanted owner.
func (o owner) apply(fd int, display string) error {
	if o.uid < 0 && o.gid < 0 {
		return nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("fstat %s: %w", display, err)
	}
	if (o.uid < 0 || uint32(o.uid) == st.Uid) && (o.gid < 0 || uint32(o.gid) == st.Gid) {
		return nil
	}
	if err := unix.Fchown(fd, o.uid, o.gid); err != nil {
		return fmt.Errorf("chown %s to %d:%d: %w", display, o.uid, o.gid, err)
	}
	return nil
}

// applyLink chowns a symlink itself (never its target).
func (o owner) applyLink(dir int, name, display string) error {
	if o.uid < 0 && o.gid < 0 {
		return nil
	}
	if err := unix.Fchownat(dir, name, o.uid, o.gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("chown symlink %s: %w", display, err)
	}
	return nil
}

// mkdirAt creates name under dir (failing if anything is there) with
// mode, owned by o, and opens it without following links.
func mkdirAt(dir int, name string, mode fs.FileMode, o owner, display string) (int, error) {
	if err := unix.Mkdirat(dir, name, 0o700); err != nil {
		return -1, fmt.Errorf("mkdir %s: %w", display, err)
	}
	fd, err := unix.Openat(dir, name, dirFlags, 0)
	if err != nil {
		return -1, fmt.Errorf("open new dir %s: %w", display, noFollowErr(err))
	}
	if err := o.apply(fd, display); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if err := unix.Fchmod(fd, uint32(mode.Perm())); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("chmod %s: %w", display, err)
	}
	return fd, nil
}

// createAt creates the regular file name under dir exclusively (O_EXCL
// with O_NOFOLLOW: never through a link, never over something).
func createAt(dir int, name string, mode fs.FileMode, o owner, display string) (*os.File, error) {
	fd, err := unix.Openat(dir, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", display, noFollowErr(err))
	}
	if err := o.apply(fd, display); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if err := unix.Fchmod(fd, uint32(mode.Perm())); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("chmod %s: %w", display, err)
	}
	return os.NewFile(uintptr(fd), display), nil
}
