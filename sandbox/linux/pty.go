package linux

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// openSandboxPTY opens a pseudo-terminal pair in the sandbox's own devpts
// instance, so that the command's terminal has a name inside the sandbox
// (tty(1), ttyname(3) and programs that reopen their terminal work). The
// master is opened through /proc/<init>/root with openat2 confined to that
// root and refusing every symlink, and checked to be a devpts ptmx; the
// peer comes from TIOCGPTPEER, which involves no path at all. When any of
// that fails, a host pty is used (it works, but has no name inside).
func openSandboxPTY(initPid int) (master, peer *os.File, err error) {
	if m, p, err := sandboxPTY(initPid); err == nil {
		return m, p, nil
	}
	return pty.Open()
}

func sandboxPTY(initPid int) (*os.File, *os.File, error) {
	root := filepath.Join("/proc", strconv.Itoa(initPid), "root")
	rootFD, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	defer unix.Close(rootFD)
	fd, err := unix.Openat2(rootFD, "dev/pts/ptmx", &unix.OpenHow{
		Flags:   unix.O_RDWR | unix.O_NOCTTY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return nil, nil, err
	}
	var st unix.Stat_t
	var fs unix.Statfs_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR ||
		unix.Fstatfs(fd, &fs) != nil || fs.Type != unix.DEVPTS_SUPER_MAGIC {
		unix.Close(fd)
		return nil, nil, fmt.Errorf("dev/pts/ptmx of the sandbox is not a devpts multiplexer")
	}
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		unix.Close(fd)
		return nil, nil, fmt.Errorf("unlock pty: %w", err)
	}
	peer, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TIOCGPTPEER, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC)
	if errno != 0 {
		unix.Close(fd)
		return nil, nil, fmt.Errorf("open pty peer: %w", errno)
	}
	// Non-blocking, so that os.NewFile makes the master pollable and a
	// Close interrupts a pending Read, as with a pty opened by path.
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		unix.Close(int(peer))
		return nil, nil, err
	}
	return os.NewFile(uintptr(fd), "ptmx"), os.NewFile(peer, "pts"), nil
}
