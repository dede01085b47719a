package wsfs

import (
	"errors"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/sandbox"
)

// mapErr wraps err (which carries the errno) in a sandbox error of the
// kind its errno means, naming the operation and path.
func mapErr(op, rel string, err error) error {
	if err == nil {
		return nil
	}
	var se *sandbox.Error
	if errors.As(err, &se) && se.Kind != nil {
		return sandbox.Wrap(op+" "+rel, nil, err)
	}
	var kind error
	var errno unix.Errno
	if errors.As(err, &errno) {
		switch errno {
		case unix.ENOENT:
			kind = sandbox.ErrNotFound
		case unix.EXDEV:
			// RESOLVE_BENEATH-style refusals and cross-root renames.
			kind = sandbox.ErrPathEscape
		case unix.ELOOP, unix.ENOTDIR, unix.EISDIR, unix.ENAMETOOLONG, unix.EINVAL, unix.ENOTEMPTY, unix.EEXIST:
			kind = sandbox.ErrInvalid
		}
	}
	return sandbox.Wrap(op+" "+rel, kind, err)
}
