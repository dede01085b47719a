package beneath

import (
	"log/slog"
	"sync"

	"golang.org/x/sys/unix"
)

// haveOpenat2 probes openat2 once per process. ENOSYS (a kernel before 5.6)
// or EPERM (a seccomp filter that predates it) select the component walks,
// and say so once.
var haveOpenat2 = sync.OnceValue(func() bool {
	fd, err := unix.Openat2(unix.AT_FDCWD, ".", &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err == nil {
		unix.Close(fd)
	}
	if err == unix.ENOSYS || err == unix.EPERM {
		slog.Warn("openat2 unavailable: resolving paths beneath a directory one component at a time (O_NOFOLLOW from held descriptors)", "err", err)
		return false
	}
	return true
})

// openat2 opens p (already cut clean, "" for dir itself) beneath dir with
// flags and the resolve flags, retrying an interrupted call.
func openat2(dir int, p string, flags int, resolve uint64) (int, error) {
	if p == "" {
		p = "."
	}
	how := &unix.OpenHow{Flags: uint64(flags), Resolve: resolve}
	for {
		fd, err := unix.Openat2(dir, p, how)
		if err != unix.EINTR {
			return fd, err
		}
	}
}
