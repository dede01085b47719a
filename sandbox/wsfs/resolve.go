package wsfs

import (
	"path"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/atfile"
	"github.com/agentbox/agentbox/sandbox"
)

// maxSymlinks bounds symlink expansion in the walk, as the kernel does.
const maxSymlinks = 40

// cleanRel checks a root-relative path. Callers pass the output of
// sandbox.ResolveWorkspacePath, but this package defends anyway: an
// absolute path or one climbing above the root is refused lexically before
// the kernel sees it.
func cleanRel(rel string) (string, error) {
	if strings.IndexByte(rel, 0) >= 0 {
		return "", sandbox.Errorf(sandbox.ErrInvalid, "path %q contains a NUL byte", rel)
	}
	if rel == "" {
		return ".", nil
	}
	if path.IsAbs(rel) {
		return "", sandbox.Errorf(sandbox.ErrPathEscape, "path %q is absolute, want one relative to the root", rel)
	}
	c := path.Clean(rel)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", sandbox.Errorf(sandbox.ErrPathEscape, "path %q leaves the root", rel)
	}
	return c, nil
}

// openIn opens rel under the root descriptor with flags (O_CLOEXEC is
// added). A final symlink is followed, inside the root, unless flags has
// O_NOFOLLOW.
func (r *Root) openIn(root int, rel string, flags int, mode uint32) (int, error) {
	if r.walk {
		if r.noLinks {
			return -1, unix.ENOSYS // symlink-free resolution needs openat2
		}
		return walkOpen(root, rel, flags, mode)
	}
	how := &unix.OpenHow{
		Flags:   uint64(flags | unix.O_CLOEXEC),
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
	}
	if r.noLinks {
		how.Resolve |= unix.RESOLVE_NO_SYMLINKS
	}
	if flags&(unix.O_CREAT|unix.O_TMPFILE) != 0 {
		how.Mode = uint64(mode)
	}
	for tries := 0; ; tries++ {
		fd, err := unix.Openat2(root, rel, how)
		// EAGAIN: a concurrent rename made the kernel unsure the lookup
		// stayed inside the root; retrying is what the man page asks for.
		if (err == unix.EAGAIN || err == unix.EINTR) && tries < 64 {
			continue
		}
		return fd, err
	}
}

// openParent opens the directory holding rel (O_PATH) and returns it with
// rel's last component. rel must name something below the root.
func (r *Root) openParent(root int, rel string) (int, string, error) {
	if rel == "." {
		return -1, "", sandbox.Errorf(sandbox.ErrInvalid, "the root itself has no parent to operate in")
	}
	dir, base := path.Split(rel)
	dir = path.Clean("./" + dir)
	fd, err := r.openIn(root, dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return -1, "", err
	}
	return fd, base, nil
}

// walkOpen resolves rel one component at a time, the way RESOLVE_IN_ROOT
// does: every component is opened with O_NOFOLLOW relative to a descriptor
// we hold; a symlink's target is read from the link itself (no second
// lookup a racer could swap) and spliced into the remaining path, an
// absolute one restarting at the root; ".." pops our own descriptor stack
// and stops at the root. The kernel never follows a link for us.
func walkOpen(root int, rel string, flags int, mode uint32) (int, error) {
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
	todo := splitPath(rel)
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
		todo = append(splitPath(target), todo...)
		return nil
	}
	for {
		if len(todo) == 0 {
			// The path ended on a directory (or was the root): open it
			// with the caller's flags.
			return unix.Openat(stack[len(stack)-1], ".", flags|unix.O_CLOEXEC, mode)
		}
		c := todo[0]
		todo = todo[1:]
		top := stack[len(stack)-1]
		switch {
		case c == "." || c == "":
			continue
		case c == "..":
			if len(stack) > 1 {
				unix.Close(top)
				stack = stack[:len(stack)-1]
			}
			continue
		}
		if len(todo) == 0 {
			fd, err := unix.Openat(top, c, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
			if err == nil {
				// O_PATH|O_NOFOLLOW opens a symlink itself; follow it if
				// asked.
				if follow && flags&unix.O_PATH != 0 && isSymlinkFd(fd) {
					err = expand(fd)
					unix.Close(fd)
					if err != nil {
						return -1, err
					}
					continue
				}
				return fd, nil
			}
			if !follow || (err != unix.ELOOP && err != unix.ENOTDIR) {
				return -1, err
			}
			// Possibly a symlink: look at the link itself.
			lfd, lerr := unix.Openat(top, c, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if lerr != nil {
				return -1, err
			}
			if !isSymlinkFd(lfd) {
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
		if isSymlinkFd(fd) {
			err = expand(fd)
			unix.Close(fd)
			if err != nil {
				return -1, err
			}
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return -1, err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			unix.Close(fd)
			return -1, unix.ENOTDIR
		}
		stack = append(stack, fd)
	}
}

func splitPath(p string) []string {
	var out []string
	for _, c := range strings.Split(p, "/") {
		if c != "" {
			out = append(out, c)
		}
	}
	return out
}

func isSymlinkFd(fd int) bool {
	var st unix.Stat_t
	return unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK
}
