package beneath

import (
	"path"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/atfile"
)

// maxSymlinks bounds symlink expansion in the walk, as the kernel does.
const maxSymlinks = 40

// OpenInRoot opens p beneath the directory dir with symlinks resolved as
// if dir were "/": an absolute target and ".." stop at dir, so nothing
// outside it is ever reached. A final link is followed unless o.Flags has
// O_NOFOLLOW; magic links (/proc/self/fd/N and kin) are never followed.
// Flags, Kind, Expect and Walk apply; Make is refused (EINVAL). Errors of
// the resolution are the errno, as openat2 gives them.
func OpenInRoot(dir int, p string, o Options) (int, error) {
	if o.Make != MakeNothing || strings.IndexByte(p, 0) >= 0 {
		return -1, unix.EINVAL
	}
	if err := o.check(dir, p); err != nil {
		return -1, err
	}
	flags := o.kindFlags(o.Flags | unix.O_CLOEXEC)
	fd, err := -1, error(unix.ENOSYS)
	if !o.Walk && haveOpenat2() {
		fd, err = openat2(dir, p, flags, unix.RESOLVE_IN_ROOT|unix.RESOLVE_NO_MAGICLINKS)
	}
	switch err {
	case unix.EAGAIN, unix.EXDEV, unix.ENOSYS, unix.EPERM:
		// EAGAIN, EXDEV: a rename raced a "..", which the walk handles
		// with its own descriptors.
		fd, err = walkInRoot(dir, p, flags)
	}
	if err == nil {
		if err = o.checkKind(fd, false); err != nil {
			unix.Close(fd)
			if _, ok := err.(*kindError); ok {
				err = unix.EINVAL
			}
		}
	}
	if err != nil {
		return -1, err
	}
	return fd, nil
}

// walkInRoot resolves p one component at a time, the way RESOLVE_IN_ROOT
// does: every component is opened with O_NOFOLLOW relative to a descriptor
// we hold; a symlink's target is read from the link itself (no second
// lookup a racer could swap) and spliced into the remaining path, an
// absolute one restarting at the root; ".." pops our own descriptor stack
// and stops at the root. The kernel never follows a link for us.
func walkInRoot(root int, p string, flags int) (int, error) {
	start, err := unix.Openat(root, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	stack := []int{start}
	defer func() {
		for _, fd := range stack {
			unix.Close(fd)
		}
	}()
	todo := splitNames(p)
	follow := flags&unix.O_NOFOLLOW == 0
	links := 0
	expand := func(linkfd int) error {
		target, err := atfile.Readlink(linkfd, "")
		if err != nil {
			return err
		}
		if links++; links > maxSymlinks {
			return unix.ELOOP
		}
		if path.IsAbs(target) {
			for len(stack) > 1 {
				unix.Close(stack[len(stack)-1])
				stack = stack[:len(stack)-1]
			}
		}
		todo = append(splitNames(target), todo...)
		return nil
	}
	for {
		top := stack[len(stack)-1]
		if len(todo) == 0 {
			// The path ended on a directory (or was the root): open it
			// with the caller's flags.
			return unix.Openat(top, ".", flags, 0)
		}
		c := todo[0]
		todo = todo[1:]
		switch c {
		case ".":
			continue
		case "..":
			if len(stack) > 1 {
				unix.Close(top)
				stack = stack[:len(stack)-1]
			}
			continue
		}
		if len(todo) == 0 {
			fd, err := unix.Openat(top, c, flags|unix.O_NOFOLLOW, 0)
			if err == nil {
				// O_PATH|O_NOFOLLOW opens a link itself; follow it if
				// asked.
				if !follow || flags&unix.O_PATH == 0 || !isLinkFd(fd) {
					return fd, nil
				}
				err = expand(fd)
				unix.Close(fd)
				if err != nil {
					return -1, err
				}
				continue
			}
			if !follow || (err != unix.ELOOP && err != unix.ENOTDIR) {
				return -1, err
			}
			// Possibly a link: look at the link itself.
			lfd, lerr := unix.Openat(top, c, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if lerr != nil {
				return -1, err
			}
			if !isLinkFd(lfd) {
				unix.Close(lfd)
				return -1, err
			}
			err = expand(lfd)
			unix.Close(lfd)
			if err != nil {
				return -1, err
			}
			continue
		}
		fd, err := unix.Openat(top, c, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, err
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return -1, err
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			err = expand(fd)
			unix.Close(fd)
			if err != nil {
				return -1, err
			}
		case unix.S_IFDIR:
			stack = append(stack, fd)
		default:
			unix.Close(fd)
			return -1, unix.ENOTDIR
		}
	}
}

// splitNames cuts p at its slashes, dropping empty names. A trailing
// slash becomes a trailing ".", so that the name before it must be a
// directory, as the kernel has it.
func splitNames(p string) []string {
	var out []string
	for _, c := range strings.Split(p, "/") {
		if c != "" {
			out = append(out, c)
		}
	}
	if len(out) > 0 && strings.HasSuffix(p, "/") {
		out = append(out, ".")
	}
	return out
}

func isLinkFd(fd int) bool {
	var st unix.Stat_t
	return unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK
}
