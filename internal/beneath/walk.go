package beneath

import "golang.org/x/sys/unix"

// The component walk of Open: every name is opened from its parent's
// descriptor with O_NOFOLLOW, so what was checked is what the next step
// starts from, and a link swapped in at any moment makes a step fail
// instead of leading elsewhere.

// stepFlags open a directory on the way: O_PATH needs no read permission,
// only search, like the kernel's own walk.
const stepFlags = unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC

// walk opens parts (p cut by split) beneath dir one component at a time.
func walk(dir int, p string, parts []string, o Options) (int, error) {
	if len(parts) == 0 {
		fd, err := unix.Openat(dir, ".", o.lastFlags(), 0)
		if err == nil {
			if err = o.checkKind(fd, true); err != nil {
				unix.Close(fd)
			}
		}
		if err != nil {
			return -1, errAt(p, parts, -1, err)
		}
		return fd, nil
	}
	cur := dir
	last := len(parts) - 1
	for i, name := range parts {
		var next int
		var err error
		if i == last {
			next, err = openLast(cur, name, shown(p, parts, i), o)
		} else {
			next, err = step(cur, name, shown(p, parts, i), o)
		}
		if cur != dir {
			unix.Close(cur)
		}
		if err != nil {
			return -1, errAt(p, parts, i, err)
		}
		cur = next
	}
	return cur, nil
}

// step opens the directory name in dir on the way, making it if missing
// and asked to. O_DIRECTORY answers ENOTDIR for a link too: isLink tells
// them apart.
func step(dir int, name, shown string, o Options) (int, error) {
	for range 2 { // a second time if someone made it as we went to
		fd, err := unix.Openat(dir, name, stepFlags, 0)
		if err == unix.ENOENT && o.Make != MakeNothing {
			fd, err = makeDir(dir, name, shown, 0o755, unix.O_RDONLY, o)
			if err == unix.EEXIST {
				continue
			}
		}
		if err == unix.ENOTDIR && isLink(dir, name) {
			err = unix.ELOOP
		}
		return fd, err
	}
	return -1, unix.EEXIST
}

// openLast opens the last component name in dir with o's flags, making it
// as o says, and checks its kind.
func openLast(dir int, name, shown string, o Options) (int, error) {
	for range 2 {
		if o.Make != MakeNew {
			fd, err := unix.Openat(dir, name, o.lastFlags(), 0)
			if err == nil {
				if err := o.checkKind(fd, true); err != nil {
					unix.Close(fd)
					return -1, err
				}
				return fd, nil
			}
			if (err == unix.ENOTDIR || err == unix.ELOOP) && isLink(dir, name) {
				return -1, unix.ELOOP
			}
			if err != unix.ENOENT || o.Make == MakeNothing {
				return -1, err
			}
		}
		var fd int
		var err error
		if o.Kind == Dir {
			fd, err = makeDir(dir, name, shown, permOr(o, 0o755), o.Flags, o)
		} else {
			fd, err = makeFile(dir, name, shown, o)
		}
		if err == unix.EEXIST && o.Make == MakeMissing {
			continue
		}
		if (err == unix.ENOTDIR || err == unix.EEXIST) && isLink(dir, name) {
			err = unix.ELOOP
		}
		return fd, err
	}
	return -1, unix.EEXIST
}

// makeDir makes the directory name in dir with perm, owned as o says, and
// returns it opened with flags (O_DIRECTORY added). It is made 0700 and
// given its owner before its mode, so no one else can use it meanwhile.
func makeDir(dir int, name, shown string, perm uint32, flags int, o Options) (int, error) {
	if err := unix.Mkdirat(dir, name, 0o700); err != nil {
		return -1, err
	}
	if o.Made != nil {
		o.Made(shown)
	}
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	out := fd
	if flags&(unix.O_ACCMODE|unix.O_PATH) != unix.O_RDONLY {
		// "." of the new directory is the new directory itself: no name
		// is looked up again.
		if out, err = unix.Openat(fd, ".", flags|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
			unix.Close(fd)
			return -1, err
		}
	}
	err = own(dir, fd, o.Owner)
	if err == nil {
		err = unix.Fchmod(fd, perm)
	}
	if out != fd {
		unix.Close(fd)
	}
	if err != nil {
		unix.Close(out)
		return -1, err
	}
	return out, nil
}

// makeFile makes the empty regular file name in dir exclusively, owned as
// o says, with o.Perm, and returns it open with o.Flags' access mode (read
// only for O_PATH).
func makeFile(dir int, name, shown string, o Options) (int, error) {
	flags := o.Flags&^(unix.O_PATH|unix.O_DIRECTORY) | unix.O_CREAT | unix.O_EXCL | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Openat(dir, name, flags, 0o600)
	if err != nil {
		return -1, err
	}
	if o.Made != nil {
		o.Made(shown)
	}
	err = own(dir, fd, o.Owner)
	if err == nil {
		err = unix.Fchmod(fd, permOr(o, 0o644))
	}
	if err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

func permOr(o Options, def uint32) uint32 {
	if o.Perm == 0 {
		return def
	}
	return uint32(o.Perm.Perm())
}

// own gives fd, just made in dir, its owner: who, or dir's owner when who
// is nil. Nothing is changed that already is as wanted.
func own(dir, fd int, who *Owner) error {
	var st unix.Stat_t
	uid, gid := -1, -1
	if who == nil {
		if err := unix.Fstat(dir, &st); err != nil {
			return err
		}
		uid, gid = int(st.Uid), int(st.Gid)
	} else {
		uid, gid = who.UID, who.GID
	}
	if uid < 0 && gid < 0 {
		return nil
	}
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if (uid < 0 || uint32(uid) == st.Uid) && (gid < 0 || uint32(gid) == st.Gid) {
		return nil
	}
	return unix.Fchown(fd, uid, gid)
}

// isLink reports whether name in dir is a symlink now.
func isLink(dir int, name string) bool {
	var st unix.Stat_t
	return unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK
}
