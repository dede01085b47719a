package sandbox

import (
	"context"
	"fmt"
	"path"
)

// LimitedReader is a session that reads a file only up to a size, so a
// caller that holds what it reads in memory (the agent harness, the MCP
// server) is not made to hold a multi-gigabyte file. Backends whose file
// reads go through wsfs implement it; use the package function
// ReadFileLimit, which falls back on a size check for the others.
type LimitedReader interface {
	// ReadFileLimit reads path as ReadFile does, but refuses a file of
	// more than max bytes (max >= 1) before reading its content, and
	// never returns more than max bytes (a file that grows while read is
	// refused too).
	// The refusal wraps ErrOutputLimit and a *FileSizeError.
	ReadFileLimit(ctx context.Context, path string, max int64) ([]byte, error)
}

// FileSizeError is the cause of a read refused for the file's size.
type FileSizeError struct {
	// Size is the file's size, or -1 when it is not known (the file grew
	// past the limit while it was read, or only its output was bounded).
	Size int64
	// Limit is the largest size that was allowed.
	Limit int64
}

func (e *FileSizeError) Error() string {
	if e.Size < 0 {
		return fmt.Sprintf("file is larger than the limit of %d bytes", e.Limit)
	}
	return fmt.Sprintf("file is %d bytes, the limit is %d", e.Size, e.Limit)
}

// maxLinkHops bounds how many symlinks ReadFileLimit's size check follows.
const maxLinkHops = 8

// ReadFileLimit reads path from s, refusing a file of more than max bytes
// (ErrOutputLimit, with a *FileSizeError). A LimitedReader holds the
// limit while it reads. Another session is asked the file's size first,
// through ListDir of its directory (following symlinks within the
// session), so that a file known to be too large is refused before any
// of it is read; a file it cannot size that way is read with ReadFile,
// which the backend bounds, and checked after.
func ReadFileLimit(ctx context.Context, s Session, p string, max int64) ([]byte, error) {
	if max < 1 {
		// The backends read 0 as no limit at all (wsfs): refused, not
		// passed on.
		return nil, Errorf(ErrInvalid, "read %s: a read limit of %d bytes; give one of at least 1", p, max)
	}
	if lr, ok := s.(LimitedReader); ok {
		return lr.ReadFileLimit(ctx, p, max)
	}
	op := "read " + p
	if size, ok := sizeOf(ctx, s, p); ok && size > max {
		return nil, Wrap(op, ErrOutputLimit, &FileSizeError{Size: size, Limit: max})
	}
	data, err := s.ReadFile(ctx, p)
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, Wrap(op, ErrOutputLimit, &FileSizeError{Size: int64(len(data)), Limit: max})
	}
	return data, nil
}

// sizeOf finds p's size from its directory's listing, following symlinks
// (a relative target from the link's directory); ok is false when the
// listing does not say (an error, a link loop, a path outside what the
// session lists).
func sizeOf(ctx context.Context, s Session, p string) (int64, bool) {
	for range maxLinkHops {
		if p == "" {
			return 0, false
		}
		dir, base := path.Split(path.Clean(p))
		if dir == "" {
			dir = "."
		}
		entries, err := s.ListDir(ctx, dir)
		if err != nil {
			return 0, false
		}
		var found *FileInfo
		for i := range entries {
			if entries[i].Name == base {
				found = &entries[i]
				break
			}
		}
		switch {
		case found == nil:
			return 0, false
		case found.Target == "":
			return found.Size, true
		case path.IsAbs(found.Target):
			p = found.Target
		default:
			p = path.Join(dir, found.Target)
		}
	}
	return 0, false
}
