package beneath

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/fsmode"
)

// Error says why Open refused a path and at which component; it unwraps to
// the errno: ELOOP for a symlink, ENOENT, ENOTDIR (a directory wanted),
// EISDIR (a non-directory wanted), EINVAL (not a regular file where one is
// wanted, or a ".." in the path), EEXIST (MakeNew), EROFS (nothing can be
// made there), ESTALE (dir is not Expect), or what the kernel said.
type Error struct {
	// Path is the path asked for.
	Path string
	// Component is Path up to and including the component at fault.
	Component string
	// Err is the errno.
	Err error

	why  string // replaces the errno's text in the message
	mode uint32 // what was found, for a kind refused
}

func (e *Error) Unwrap() error { return e.Err }

func (e *Error) Error() string {
	c := e.Component
	switch {
	case e.Err == unix.ELOOP && c == e.Path:
		return "refusing the symbolic link " + c
	case e.Err == unix.ELOOP:
		return fmt.Sprintf("%s goes through the symbolic link %s; refusing", e.Path, c)
	case e.why != "":
		return fmt.Sprintf("%s: %s", c, e.why)
	case e.mode != 0:
		return fmt.Sprintf("%s is a %s, not a regular file", c, fsmode.Describe(fsmode.FromStat(e.mode)))
	}
	switch e.Err {
	case unix.ENOENT:
		return c + " does not exist"
	case unix.ENOTDIR:
		return c + " is not a directory"
	case unix.EISDIR:
		return c + " is a directory"
	case unix.EEXIST:
		return c + " exists already"
	case unix.EROFS:
		return c + " does not exist and cannot be made: its directory is on a read-only mount"
	case unix.ESTALE:
		return fmt.Sprintf("open %s: the directory it is under is no longer the one expected", e.Path)
	}
	return fmt.Sprintf("open %s: %v", c, e.Err)
}

// kindError is what checkKind says of a file that is not regular.
type kindError struct{ mode uint32 }

func (k *kindError) Error() string { return "not a regular file" }

// errAt is the Error for err at parts[i] of p (p itself for i < 0).
func errAt(p string, parts []string, i int, err error) error {
	c := p
	if i >= 0 {
		c = shown(p, parts, i)
	}
	e := &Error{Path: p, Component: c, Err: err}
	if k, ok := err.(*kindError); ok {
		e.Err, e.mode = unix.EINVAL, k.mode
	}
	return e
}
