package snapshot

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/beneath"
)

// errChanged marks a path that stopped being a plain path inside the tree
// between the walk and the read (a component became a symlink).
var errChanged = errors.New("changed into a symlink path while saving")

// source opens the files of a tree being saved without ever leaving it:
// beneath.Open refuses a symlink in any component, with openat2 where
// the kernel has it and one component at a time where not.
type source struct {
	fd   int
	walk bool // the component walk even where openat2 works (tests)
}

func openSource(dir string) (*source, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	return &source{fd: fd}, nil
}

func (s *source) close() { unix.Close(s.fd) }

// open opens p (tree-relative) for reading; O_NONBLOCK so that a path
// swapped for a fifo cannot hang the save.
func (s *source) open(p string) (*rawFile, error) {
	fd, err := beneath.Open(s.fd, p, beneath.Options{Flags: unix.O_RDONLY | unix.O_NONBLOCK, Walk: s.walk})
	switch {
	case errors.Is(err, unix.ELOOP):
		return nil, errChanged
	case err != nil:
		return nil, err
	}
	return &rawFile{fd: fd, name: p}, nil
}
