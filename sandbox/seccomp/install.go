//go:build linux

package seccomp

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/agentbox/agentbox/sandbox"
	"golang.org/x/sys/unix"
)

// Install loads the filter into the calling process, on every thread
// (SECCOMP_FILTER_FLAG_TSYNC), so it binds the program the caller execs
// next and everything that program starts. It is irreversible.
//
// Install sets no_new_privs on the calling thread first. The caller is
// expected to have done so already (the kernel requires it to install a
// filter without CAP_SYS_ADMIN); doing it again is harmless, and it spares
// callers the trap that the flag is per thread while Go moves goroutines
// between threads. TSYNC then extends no_new_privs to every thread.
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
	defer runtime.UnlockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return sandbox.Wrap("seccomp: set no_new_privs", sandbox.ErrUnavailable, err)
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	r, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	switch {
	case errno == unix.ENOSYS || errno == unix.EINVAL:
		return sandbox.Wrap("seccomp: install filter", sandbox.ErrUnavailable,
			fmt.Errorf("kernel lacks seccomp filters with TSYNC: %w", errno))
	case errno != 0:
		return sandbox.Wrap("seccomp: install filter", nil, errno)
	case r != 0:
		// With TSYNC, a positive return is the id of a thread that could
		// not be synchronised (it runs a filter that is not an ancestor of
		// ours); no thread got the new filter.
		return sandbox.Wrap("seccomp: install filter", nil,
			fmt.Errorf("thread %d has a diverging seccomp filter; no thread was filtered", r))
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
