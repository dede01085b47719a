package linux

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// netThread is an OS thread of the client moved into a network namespace
// of its own, from which the session's init is forked: a child is born in
// the network namespace of the thread that cloned it, so the init starts
// in the session's namespace without CLONE_NEWNET. Building a network
// namespace is the costliest part of the init's clone (~0.8 ms here, the
// kernel running every registered network subsystem's set-up); made on
// this thread, it is built while the client makes the session's
// directories and groups, not after. The thread then returns to the
// client's namespace.
//
// The namespace is the one CLONE_NEWNET would make: owned by the client's
// user namespace, holding only a loopback device (down until the init
// brings it up). A rootless session cannot use it (its init's user
// namespace would not own it) and clones its own.
type netThread struct {
	// run carries the fork to the thread (buffered: the caller does not
	// wait for the namespace to hand it over); closed to let the thread
	// go unused.
	run chan func(made bool)
}

// startNetThread starts the thread and its namespace. The caller hands it
// at most one fork and must release it.
func startNetThread() *netThread {
	t := &netThread{run: make(chan func(made bool), 1)}
	go func() {
		// Locked while the thread is in the session's namespace: no other
		// goroutine may run on it then. It goes back to the client's
		// namespace afterwards rather than ending with the goroutine: the
		// runtime cannot end the main thread, which it might be, and
		// would park it for good, in the session's namespace.
		runtime.LockOSThread()
		back, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err == nil {
			if err = unix.Unshare(unix.CLONE_NEWNET); err != nil {
				unix.Close(back)
			}
		}
		if f, ok := <-t.run; ok {
			f(err == nil)
		}
		if err == nil {
			err = unix.Setns(back, unix.CLONE_NEWNET)
			unix.Close(back)
			if err != nil {
				return // still locked: the runtime ends the thread
			}
		}
		runtime.UnlockOSThread()
	}()
	return t
}

// fork runs f on the thread, once its namespace is made or has failed to
// be: made says which. f forks the init, with CLONE_NEWNET when !made.
func (t *netThread) fork(f func(made bool)) {
	done := make(chan struct{})
	t.run <- func(made bool) {
		defer close(done)
		f(made)
	}
	<-done
}

// release lets the thread end; after fork, it only closes the channel.
func (t *netThread) release() { close(t.run) }
