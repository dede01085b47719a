// Package sibling finds the programs agentbox runs from beside its own
// executable (agentbox-init, agentbox-full) under one trust rule, so that
// no program is ever run that someone other than agentbox's own owner (or
// root) could have put there.
package sibling

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// Program is a checked sibling program, held open: Path runs exactly the
// file that was checked, whatever its name leads to by then.
type Program struct {
	// Name is where it was found.
	Name string
	f    *os.File
}

// Path is the program's /proc/self/fd path, valid while it is open: exec
// it (execve resolves it before it closes close-on-exec descriptors).
func (p *Program) Path() string { return "/proc/self/fd/" + strconv.Itoa(int(p.f.Fd())) }

// Fd is the descriptor the program is held at.
func (p *Program) Fd() uintptr { return p.f.Fd() }

// Close releases the program.
func (p *Program) Close() error { return p.f.Close() }

// Open opens the program name beside the running executable if it is
// safe to run; an error wrapping os.ErrNotExist when there is none.
func Open(name string) (*Program, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find this executable: %w", err)
	}
	// /proc/self/exe is the file this process runs, even if exe has been
	// replaced since.
	var self unix.Stat_t
	if err := unix.Stat("/proc/self/exe", &self); err != nil {
		return nil, fmt.Errorf("stat this executable: %w", err)
	}
	return OpenIn(filepath.Dir(exe), name, self.Uid)
}

// OpenIn opens dir/name (O_PATH, close-on-exec) when it is safe to run: a
// regular ELF executable, not a symbolic link, not writable by group or
// others, owned by root or by owner (the owner of the running agentbox:
// whoever could replace it could replace agentbox too), in a directory
// owned likewise where no one else can put another file in its place.
//
// Threat: a check of a path followed by an exec of the path runs whatever
// is there by then. The checks here are of the descriptor, which the
// caller runs (Path); a symbolic link is refused rather than followed,
// since whoever controls its target's directory controls what runs.
func OpenIn(dir, name string, owner uint32) (*Program, error) {
	p := filepath.Join(dir, name)
	d, err := os.OpenFile(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	defer d.Close()
	var dst unix.Stat_t
	if err := unix.Fstat(int(d.Fd()), &dst); err != nil {
		return nil, fmt.Errorf("stat %s: %w", dir, err)
	}
	switch {
	case dst.Uid != 0 && dst.Uid != owner:
		return nil, fmt.Errorf("refusing to run %s: its directory is owned by uid %d, neither root nor the owner of agentbox (uid %d)", p, dst.Uid, owner)
	case dst.Mode&0o022 != 0 && dst.Mode&unix.S_ISVTX == 0:
		// Without the sticky bit anyone who can write the directory can
		// rename a file of their choosing (a hard link to a root-owned
		// program, say) over the sibling.
		return nil, fmt.Errorf("refusing to run %s: its directory is writable by group or others (%s) and not sticky; chmod go-w %s", p, os.ModeDir|os.FileMode(dst.Mode&0o777), dir)
	}
	fd, err := unix.Openat(int(d.Fd()), name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	f := os.NewFile(uintptr(fd), p)
	if err := check(f, p, owner); err != nil {
		f.Close()
		return nil, err
	}
	return &Program{Name: p, f: f}, nil
}

// check checks the file f, opened as p, as OpenIn describes.
func check(f *os.File, p string, owner uint32) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("stat %s: %w", p, err)
	}
	switch {
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return fmt.Errorf("refusing to run %s: it is a symbolic link; put the program itself there", p)
	case st.Mode&unix.S_IFMT != unix.S_IFREG || st.Mode&0o111 == 0:
		return fmt.Errorf("%s is not an executable file", p)
	case st.Mode&0o022 != 0:
		return fmt.Errorf("refusing to run %s: it is writable by group or others (%s); chmod go-w it", p, os.FileMode(st.Mode&0o777))
	case st.Uid != 0 && st.Uid != owner:
		return fmt.Errorf("refusing to run %s: owned by uid %d, neither root nor the owner of agentbox (uid %d)", p, st.Uid, owner)
	}
	// The program is run from a close-on-exec descriptor, which a #!
	// script cannot be run from (its interpreter would be given a
	// /proc/self/fd path that is closed by then): say so here. A file this
	// process may not read (mode 0711) is run unchecked; the kernel reads
	// it anyway.
	r, err := os.OpenFile("/proc/self/fd/"+strconv.Itoa(int(f.Fd())), os.O_RDONLY|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return nil
	}
	defer r.Close()
	magic := make([]byte, 4)
	if n, _ := r.ReadAt(magic, 0); n != 4 || string(magic) != "\x7fELF" {
		return fmt.Errorf("%s is not an ELF executable (a script cannot be run from a checked descriptor)", p)
	}
	return nil
}

// IsMissing reports whether err says there is no such program.
func IsMissing(err error) bool { return errors.Is(err, os.ErrNotExist) }
