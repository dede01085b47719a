package artifact

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/agentbox/agentbox/internal/atfile"
	"github.com/agentbox/agentbox/internal/beneath"
	"github.com/agentbox/agentbox/internal/fsmode"
	"github.com/agentbox/agentbox/sandbox"
	"golang.org/x/sys/unix"
)

// DirSource is a workspace on the host's disk. Every path is opened with
// internal/beneath, which refuses a symlink in any component, so a symlink
// planted or swapped in by the sandboxed agent can neither be followed
// (out of the workspace, or onto a file the rules would not promote) nor
// pass for a regular file. (It does not use sandbox/wsfs: the hard-link
// rule needs st_nlink from the opened descriptor, and files are streamed
// rather than read whole.)
type DirSource struct {
	dir string // resolved through its own symlinks once, at creation
}

// NewDirSource opens the host workspace directory dir.
func NewDirSource(dir string) (*DirSource, error) {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, sandbox.Wrap("artifact: open source "+dir, sandbox.ErrNotFound, err)
	}
	real, err = filepath.Abs(real)
	if err != nil {
		return nil, err
	}
	fd, err := beneath.OpenPath(real, beneath.Options{Flags: unix.O_PATH, Kind: beneath.Dir})
	if err != nil {
		return nil, sandbox.Wrap("artifact: open source "+dir, sandbox.ErrInvalid, err)
	}
	unix.Close(fd)
	return &DirSource{dir: real}, nil
}

// Describe implements Source.
func (d *DirSource) Describe() string { return "dir:" + d.dir }

// Where implements Source: the host path.
func (d *DirSource) Where(rel string) string { return filepath.Join(d.dir, filepath.FromSlash(rel)) }

// List implements Source.
func (d *DirSource) List(ctx context.Context, descend func(string) bool) ([]Entry, error) {
	root, err := beneath.OpenPath(d.dir, beneath.Options{Flags: unix.O_PATH, Kind: beneath.Dir})
	if err != nil {
		return nil, sandbox.Wrap("artifact: list "+d.dir, nil, err)
	}
	defer unix.Close(root)
	var out []Entry
	if err := d.walk(ctx, root, "", descend, &out); err != nil {
		return nil, sandbox.Wrap("artifact: list "+d.dir, nil, err)
	}
	return out, nil
}

func (d *DirSource) walk(ctx context.Context, dir int, rel string, descend func(string) bool, out *[]Entry) error {
	names, err := atfile.Names(dir)
	if err != nil {
		return fmt.Errorf("list %s: %w", rel, err)
	}
	for _, n := range names {
		if err := ctx.Err(); err != nil {
			return err
		}
		r := path.Join(rel, n)
		var st unix.Stat_t
		if err := unix.Fstatat(dir, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue // removed while we listed
			}
			return fmt.Errorf("stat %s: %w", r, err)
		}
		e := Entry{Path: r, Mode: fsmode.FromStat(st.Mode), Size: st.Size, Nlink: uint64(st.Nlink)}
		if e.Mode&fs.ModeSymlink != 0 {
			e.Target, _ = atfile.Readlink(dir, n)
		}
		*out = append(*out, e)
		if e.Mode.IsDir() && (descend == nil || descend(r)) {
			sub, err := beneath.Open(dir, n, beneath.Options{Flags: unix.O_PATH, Kind: beneath.Dir})
			if err != nil {
				return fmt.Errorf("descend into %s: %w", r, err)
			}
			err = d.walk(ctx, sub, r, descend, out)
			unix.Close(sub)
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// Open implements Source: the checks run on the opened descriptor, so
// what was checked is what is read.
func (d *DirSource) Open(ctx context.Context, rel string) (io.ReadCloser, Entry, error) {
	clean := path.Clean(rel)
	if path.IsAbs(clean) || clean == "." || clean == ".." || strings.HasPrefix(clean, "../") {
		return nil, Entry{}, sandbox.Errorf(sandbox.ErrPathEscape, "artifact: open %q: path leaves the workspace", rel)
	}
	f, err := beneath.OpenPath(d.Where(clean), beneath.Options{Kind: beneath.Regular})
	if err != nil {
		return nil, Entry{}, linkErr("artifact: open "+rel, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(f, &st); err != nil {
		unix.Close(f)
		return nil, Entry{}, fmt.Errorf("fstat %s: %w", rel, err)
	}
	e := Entry{Path: clean, Mode: fsmode.FromStat(st.Mode), Size: st.Size, Nlink: uint64(st.Nlink)}
	return os.NewFile(uintptr(f), d.Where(clean)), e, nil
}

// linkErr gives a refused open its kind: a link, or a file where a
// directory was on the way, is an attempt to lead the read elsewhere.
func linkErr(op string, err error) error {
	var kind error
	switch {
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
		kind = sandbox.ErrPathEscape
	case errors.Is(err, unix.ENOENT):
		kind = sandbox.ErrNotFound
	}
	return sandbox.Wrap(op, kind, err)
}
