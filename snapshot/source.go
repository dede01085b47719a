package snapshot

import (
	"errors"
	"os"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// errChanged marks a path that stopped being a plain path inside the tree
// between the walk and the read (a component became a symlink).
var errChanged = errors.New("changed into a symlink path while saving")

// source opens the files of a tree being saved without ever leaving it.
// It uses openat2 with RESOLVE_BENEATH and RESOLVE_NO_SYMLINKS (one system
// call, the kernel refuses any symlink or escape on the way) and falls
// back to os.Root (a component at a time) where openat2 is missing or
// filtered.
type source struct {
	root    *os.Root
	fd      int
	openat2 atomic.Bool
}

func openSource(dir string) (*source, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		root.Close()
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	s := &source{root: root, fd: fd}
	s.openat2.Store(true)
	return s, nil
}

func (s *source) close() {
	unix.Close(s.fd)
	s.root.Close()
}

// open opens p (tree-relative) for reading; O_NONBLOCK so that a path
// swapped for a fifo cannot hang the save.
func (s *source) open(p string) (*rawFile, error) {
	const flags = unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC
	if s.openat2.Load() {
		fd, err := unix.Openat2(s.fd, p, &unix.OpenHow{
			Flags:   flags,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
		switch {
		case err == nil:
			return &rawFile{fd: fd, name: p}, nil
		case errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV):
			return nil, errChanged
		case errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM):
			s.openat2.Store(false) // not available here: fall back for good
		default:
			return nil, &os.PathError{Op: "openat2", Path: p, Err: err}
		}
	}
	f, err := s.root.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	// Keep the descriptor, drop the *os.File (it would close it).
	fd, err := unix.Dup(int(f.Fd()))
	f.Close()
	if err != nil {
		return nil, &os.PathError{Op: "dup", Path: p, Err: err}
	}
	unix.CloseOnExec(fd)
	return &rawFile{fd: fd, name: p}, nil
}
