package beneath

import (
	"io/fs"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Kind is what the last component of a path must be.
type Kind uint8

const (
	Any     Kind = iota // anything (Open: anything but a symlink)
	Dir                 // a directory
	NonDir              // anything but a directory; made as an empty regular file
	Regular             // a regular file; made empty. A fifo found there does not block the open.
)

// Make says what Open makes when it is missing.
type Make uint8

const (
	MakeNothing Make = iota // every component must exist
	MakeMissing             // directories on the way, and the last component as its Kind says
	MakeNew                 // as MakeMissing, but the last component must not exist yet (EEXIST)
)

// Owner is who owns what is made; -1 leaves an id as the process's.
type Owner struct{ UID, GID int }

// Identity is a directory's device and inode number.
type Identity struct{ Dev, Ino uint64 }

// Options say how to open a path. The zero value opens an existing path
// read-only, refusing only links.
type Options struct {
	// Flags open the last component; O_NOFOLLOW and O_CLOEXEC are added
	// (Open), O_CLOEXEC only (OpenInRoot). O_CREAT and O_TMPFILE are refused: use Make.
	Flags int
	// Kind is what the last component must be.
	Kind Kind
	// Make makes what is missing (Open and OpenParent only): directories
	// mode 0755, the last component Perm.
	Make Make
	// Perm is the permission of the last component when it is made, set
	// exactly (no umask); 0 means 0755 for a directory, 0644 for a file.
	Perm fs.FileMode
	// Owner owns what is made; nil means the directory it is made in.
	Owner *Owner
	// Made, when set, is told each path made, as far as it was made,
	// before anything else is done to it (to remove it again on failure).
	Made func(p string)
	// Expect, when not zero, is the directory the walk must start from;
	// another one (say, the path to it was replaced) refuses with ESTALE.
	Expect Identity
	// Walk resolves with the component walk even where openat2 works:
	// tests cover the fallback with it.
	Walk bool
}

// Open opens p beneath the directory dir and returns a descriptor of its
// last component, refusing a symlink in any component of p (the last
// included) with an *Error that unwraps to ELOOP. p is taken relative to
// dir even when it starts with "/"; "." and empty components are skipped
// and ".." is refused (EINVAL): no link is followed, so it could only be
// meant lexically, and the caller should clean p itself.
func Open(dir int, p string, o Options) (int, error) {
	parts, err := split(p)
	if err == nil {
		err = o.check(dir, p)
	}
	if err != nil {
		return -1, err
	}
	if o.Make == MakeNothing && !o.Walk && haveOpenat2() {
		fd, err := openat2(dir, strings.Join(parts, "/"), o.lastFlags(), unix.RESOLVE_BENEATH|unix.RESOLVE_NO_SYMLINKS|unix.RESOLVE_NO_MAGICLINKS)
		switch err {
		case nil:
			if err := o.checkKind(fd, true); err != nil {
				unix.Close(fd)
				return -1, errAt(p, parts, len(parts)-1, err)
			}
			return fd, nil
		case unix.ELOOP, unix.ENOENT, unix.ENOTDIR, unix.EXDEV, unix.EAGAIN, unix.ENOSYS, unix.EPERM:
			// The walk names the component at fault, or resolves
			// where openat2 would not.
		default:
			return -1, errAt(p, parts, len(parts)-1, err)
		}
	}
	return walk(dir, p, parts, o)
}

// OpenPath opens the absolute path p as Open does beneath "/": no
// component of p may be a symlink. Resolve p (filepath.EvalSymlinks) first
// where links in a trusted part of it are fine.
func OpenPath(p string, o Options) (int, error) {
	if !filepath.IsAbs(p) {
		return -1, &Error{Path: p, Component: p, Err: unix.EINVAL, why: "not an absolute path"}
	}
	root, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &Error{Path: p, Component: "/", Err: err}
	}
	defer unix.Close(root)
	return Open(root, p, o)
}

// OpenParent opens the directory holding p beneath dir as Open does (an
// O_PATH descriptor; Make makes the missing directories on the way, Owner,
// Made, Expect and Walk apply) and returns it with p's last name, which is
// a real name: p naming dir itself is refused (EINVAL).
func OpenParent(dir int, p string, o Options) (int, string, error) {
	parts, err := split(p)
	if err == nil && len(parts) == 0 {
		err = &Error{Path: p, Component: p, Err: unix.EINVAL, why: "no last name to open the parent of"}
	}
	if err != nil {
		return -1, "", err
	}
	po := Options{Flags: unix.O_PATH, Kind: Dir, Owner: o.Owner, Made: o.Made, Expect: o.Expect, Walk: o.Walk}
	if o.Make != MakeNothing {
		po.Make = MakeMissing
	}
	fd, err := Open(dir, shown(p, parts, len(parts)-2), po)
	if e, ok := err.(*Error); ok {
		e.Path = p
	}
	if err != nil {
		return -1, "", err
	}
	return fd, parts[len(parts)-1], nil
}

// split cuts p into the names to walk.
func split(p string) ([]string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return nil, &Error{Path: p, Component: p, Err: unix.EINVAL, why: "a NUL byte in the path"}
	}
	var parts []string
	for _, c := range strings.Split(p, "/") {
		switch c {
		case "", ".":
			continue
		case "..":
			return nil, &Error{Path: p, Component: p, Err: unix.EINVAL, why: `".." is refused: no link is followed, so clean the path first`}
		}
		parts = append(parts, c)
	}
	return parts, nil
}

// shown is p up to parts[i] as p writes it (p itself for i < 0).
func shown(p string, parts []string, i int) string {
	s := strings.Join(parts[:i+1], "/")
	if strings.HasPrefix(p, "/") {
		s = "/" + s
	}
	return s
}

// check refuses options that cannot be met, and a dir other than Expect.
func (o Options) check(dir int, p string) error {
	// O_TMPFILE holds O_DIRECTORY's bit: it is all its bits or not it.
	if o.Flags&unix.O_CREAT != 0 || o.Flags&unix.O_TMPFILE == unix.O_TMPFILE {
		return &Error{Path: p, Component: p, Err: unix.EINVAL, why: "O_CREAT and O_TMPFILE are refused; Make says what to make"}
	}
	if o.Make != MakeNothing && o.Kind == Any {
		return &Error{Path: p, Component: p, Err: unix.EINVAL, why: "Make needs a Kind to make"}
	}
	if o.Expect == (Identity{}) {
		return nil
	}
	var st unix.Stat_t
	err := unix.Fstat(dir, &st)
	if err == nil && (st.Dev != o.Expect.Dev || st.Ino != o.Expect.Ino) {
		err = unix.ESTALE
	}
	if err != nil {
		return &Error{Path: p, Component: p, Err: err}
	}
	return nil
}

// lastFlags are the flags Open opens the last component with.
func (o Options) lastFlags() int { return o.kindFlags(o.Flags | unix.O_NOFOLLOW | unix.O_CLOEXEC) }

// kindFlags adds to f what o.Kind asks of the open. A regular file is
// opened non-blocking so that a fifo in its place cannot hang the open;
// checkKind takes the flag back.
func (o Options) kindFlags(f int) int {
	switch {
	case o.Kind == Dir:
		f |= unix.O_DIRECTORY
	case o.Kind == Regular && f&unix.O_PATH == 0:
		f |= unix.O_NONBLOCK
	}
	return f
}

// checkKind checks what fd is against o.Kind; noLinks refuses a symlink
// (which O_PATH|O_NOFOLLOW opens as itself).
func (o Options) checkKind(fd int, noLinks bool) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	typ := st.Mode & unix.S_IFMT
	switch {
	case typ == unix.S_IFLNK && noLinks:
		return unix.ELOOP
	case o.Kind == Dir && typ != unix.S_IFDIR:
		return unix.ENOTDIR
	case (o.Kind == NonDir || o.Kind == Regular) && typ == unix.S_IFDIR:
		return unix.EISDIR
	case o.Kind == Regular && typ != unix.S_IFREG:
		return &kindError{mode: st.Mode}
	}
	if o.Kind == Regular && o.Flags&(unix.O_NONBLOCK|unix.O_PATH) == 0 {
		return unix.SetNonblock(fd, false)
	}
	return nil
}
