package linux

import (
	"os"
	"runtime"
	"sync"

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
	run      chan func(made bool)
	closeRun sync.Once
	// ready is closed once the namespace is made, or known not to be;
	// ns then names it ("net:[inode]"), or is "".
	ready chan struct{}
	ns    string
	// done is closed once the thread is back in the client's namespace
	// (or ended) after its fork or release.
	done chan struct{}
}

// startNetThread starts the thread and its namespace. The caller hands it
// at most one fork and must release it.
func startNetThread() *netThread {
	t := &netThread{run: make(chan func(made bool), 1), ready: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(t.done)
		// Locked while the thread is in the session's namespace: no other
		// goroutine may run on it then. It goes back to the client's
		// namespace afterwards rather than ending with the goroutine.
		runtime.LockOSThread()
		made := false
		var back int
		// Not on the main thread: its id is the process's, so /proc/PID
		// would show the session's namespace meanwhile, and the runtime
		// cannot end it should the way back fail (it would park it, in
		// that namespace, for good). The init is then cloned as usual.
		if unix.Gettid() != unix.Getpid() {
			var err error
			if back, err = unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
				if err = unix.Unshare(unix.CLONE_NEWNET); err == nil {
					made = true
					t.ns, _ = os.Readlink("/proc/thread-self/ns/net")
				} else {
					unix.Close(back)
				}
			}
		}
		close(t.ready)
		if f, ok := <-t.run; ok {
			f(made)
		}
		if made {
			err := unix.Setns(back, unix.CLONE_NEWNET)
			unix.Close(back)
			if err != nil {
				return // still locked, and not the main thread: the runtime ends it
			}
		}
		runtime.UnlockOSThread()
	}()
	return t
}

// fork runs f on the thread, once its namespace is made or has failed to
// be: made says which. f forks the init, with CLONE_NEWNET when !made.
// fork returns once the thread is back in the client's namespace. It may
// be called once.
func (t *netThread) fork(f func(made bool)) {
	t.run <- f
	t.release()
	<-t.done
}

// release lets the thread go: unused, or after its fork.
func (t *netThread) release() { t.closeRun.Do(func() { close(t.run) }) }
