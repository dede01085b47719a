package artifact

import (
	"context"
	"io"
	"io/fs"
)

// Source is a workspace to promote from: a host directory (DirSource) or a
// live sandbox session (SessionSource).
type Source interface {
	// List walks the workspace without following links and returns every
	// entry below its root, paths slash-separated and relative. It
	// descends into a directory only when descend(dir) is true (nil:
	// always), so that large inputs no rule can match are not walked.
	List(ctx context.Context, descend func(dir string) bool) ([]Entry, error)
	// Open opens the regular file at rel for reading, refusing links and
	// anything that is not (or no longer is) a regular file; the Entry is
	// taken from the opened file where the source can.
	Open(ctx context.Context, rel string) (io.ReadCloser, Entry, error)
	// Where is rel as the provenance record names it (a host path or a
	// sandbox path).
	Where(rel string) string
	// Describe names the source for the record ("dir:/path", "session:linux/ab12").
	Describe() string
}

// Entry is one workspace entry as a Source sees it.
type Entry struct {
	// Path is relative to the workspace root, slash-separated.
	Path string
	// Mode carries the type bits (fs.ModeDir, fs.ModeSymlink ...).
	Mode fs.FileMode
	Size int64
	// Nlink is the hard-link count; 0 means the source cannot tell, which
	// fails the no-hard-links rule rather than passing it.
	Nlink uint64
	// Target is a symlink's target.
	Target string
	// Note says why a field is unknown (Nlink 0), for error messages.
	Note string
}
