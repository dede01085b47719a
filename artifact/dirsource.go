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
	"github.com/agentbox/agentbox/internal/fsmode"
	"github.com/agentbox/agentbox/sandbox"
	"golang.org/x/sys/unix"
)

// DirSource is a workspace on the host's disk. Every path is resolved one
// component at a time from a descriptor of the root with O_NOFOLLOW, so a
// symlink planted or swapped in by the sandboxed agent can neither be
// followed out of the workspace nor pass for a regular file. (It does not
// use sandbox/wsfs: the hard-link rule needs st_nlink from the opened
// descriptor, and files are streamed rather than read whole.)
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
	fd, err := openDir(real)
	if err != nil {
		return nil, sandbox.Wrap("artifact: open source "+dir, sandbox.ErrInvalid, err)
	}
	unix.Close(fd)
	return &DirSource{dir: real}, nil
}

const (
	dirFlags  = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fileFlags = unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC
)

// openDir opens an absolute path without following any symlink in it.
func openDir(p string) (int, error) {
	fd, err := unix.Open("/", dirFlags, 0)
	if err != nil {
		return -1, err
	}
	for _, c := range strings.Split(strings.Trim(p, "/"), "/") {
		if c == "" {
			continue
		}
		next, err := unix.Openat(fd, c, dirFlags, 0)
		unix.Close(fd)
		if err != nil {
			return -1, fmt.Errorf("open %s without following links: at %q: %w", p, c, err)
		}
		fd = next
	}
	return fd, nil
}

// Describe implements Source.
func (d *DirSource) Describe() string { return "dir:" + d.dir }

// Where implements Source: the host path.
func (d *DirSource) Where(rel string) string { return filepath.Join(d.dir, filepath.FromSlash(rel)) }

// List implements Source.
func (d *DirSource) List(ctx context.Context, descend func(string) bool) ([]Entry, error) {
	root, err := openDir(d.dir)
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
			sub, err := unix.Openat(dir, n, dirFlags, 0)
			if err != nil {
				return fmt.Errorf("open %s without following links: %w", r, err)
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
	fd, err := openDir(d.dir)
	if err != nil {
		return nil, Entry{}, err
	}
	parts := strings.Split(clean, "/")
	for _, c := range parts[:len(parts)-1] {
		next, err := unix.Openat(fd, c, dirFlags, 0)
		unix.Close(fd)
		if err != nil {
			return nil, Entry{}, linkErr("open "+rel, err)
		}
		fd = next
	}
	f, err := unix.Openat(fd, parts[len(parts)-1], fileFlags, 0)
	unix.Close(fd)
	if err != nil {
		return nil, Entry{}, linkErr("open "+rel, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(f, &st); err != nil {
		unix.Close(f)
		return nil, Entry{}, fmt.Errorf("fstat %s: %w", rel, err)
	}
	e := Entry{Path: clean, Mode: fsmode.FromStat(st.Mode), Size: st.Size, Nlink: uint64(st.Nlink)}
	if !e.Mode.IsRegular() {
		unix.Close(f)
		return nil, e, fmt.Errorf("open %s: it is a %s, not a regular file", rel, fsmode.Describe(e.Mode))
	}
	if err := unix.SetNonblock(f, false); err != nil {
		unix.Close(f)
		return nil, e, err
	}
	return os.NewFile(uintptr(f), d.Where(clean)), e, nil
}

// linkErr explains what O_NOFOLLOW's ELOOP means.
func linkErr(op string, err error) error {
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
		return sandbox.Wrap(op, sandbox.ErrPathEscape, fmt.Errorf("a symlink is in the way: %w", err))
	}
	if errors.Is(err, unix.ENOENT) {
		return sandbox.Wrap(op, sandbox.ErrNotFound, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}
