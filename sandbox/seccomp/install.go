//go:build linux

package seccomp

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/agentbox/agentbox/sandbox"
	"golang.org/x/sys/unix"
)

// Install loads the filter into the calling thread only (no
// SECCOMP_FILTER_FLAG_TSYNC), so it binds what that thread forks or execs
// next and everything those programs start, while the process's other
// threads keep working unfiltered: the native backend confines the init's
// spawning thread this way and leaves the rest of the init free. It is
// irreversible.
//
// Install locks the calling goroutine to its OS thread and never unlocks
// it: the filter belongs to the thread, and a goroutine that moved would
// start programs unfiltered from another one. It sets no_new_privs on the
// thread first; the kernel requires it to install a filter without
// CAP_SYS_ADMIN, and like the filter it is per thread.
func Install() error {
	prog, err := Filter()
	if err != nil {
		return sandbox.Wrap("seccomp: build filter", nil, err)
	}
	for _, act := range []uint32{actKill, unix.SECCOMP_RET_ERRNO} {
		if err := actionAvailable(act); err != nil {
			return err
		}
	}

	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return sandbox.Wrap("seccomp: set no_new_privs", sandbox.ErrUnavailable, err)
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	switch {
	case errno == unix.ENOSYS || errno == unix.EINVAL:
		return sandbox.Wrap("seccomp: install filter", sandbox.ErrUnavailable,
			fmt.Errorf("kernel lacks seccomp filters: %w", errno))
	case errno != 0:
		return sandbox.Wrap("seccomp: install filter", nil, errno)
	}
	return nil
}

// actionAvailable checks that the kernel knows a seccomp return action
// (SECCOMP_RET_KILL_PROCESS needs Linux 4.14).
func actionAvailable(act uint32) error {
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_ACTION_AVAIL, 0, uintptr(unsafe.Pointer(&act)))
	if errno != 0 {
		return sandbox.Wrap("seccomp: check action", sandbox.ErrUnavailable,
			fmt.Errorf("kernel does not support seccomp action %#x: %w", act, errno))
	}
	return nil
}
