// Package nsinit is the native backend's session init: pid 1 inside the
// sandbox's namespaces, and its confined spawning thread, from which
// every command is forked. The host client (package linux) starts it by
// re-executing a binary that links this package (agentbox-init, or the
// program itself) with argv[0] set to control.Marker; this package's
// init function recognises that and runs the init instead of the
// program's main. Everything the init learns from the host comes through
// package control.
//
// Code here runs in two places: the init's own threads, inside the
// session's namespaces and privileged over them (main.go, rootfs.go,
// serve.go), and the spawning thread, which drops every privilege and
// enters seccomp and landlock before it forks anything (spawner.go,
// confine.go).
package nsinit

import (
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/agentbox/agentbox/sandbox/linux/control"

	"golang.org/x/sys/unix"
)

// init runs the session init in place of the program's main when this
// process was started as one (argv[0] is control.Marker), and never
// returns then. Running from a package initialiser, rather than from a
// call the program must remember to make first thing in main, means a
// program that links the native backend cannot run its own main a second
// time as the init by mistake; package initialisers that come after this
// one are skipped, which also spares the init their start-up cost.
//
// The main goroutine is pinned to the main thread, the thread-group
// leader. Threat: the confined spawning thread runs as the session user;
// were it the leader, the kernel's permission check for a signal sent to
// pid 1 would use its credentials, and a command running as root inside
// the sandbox could end its own session's init.
func init() {
	if len(os.Args) == 0 || os.Args[0] != control.Marker {
		return
	}
	runtime.LockOSThread()
	err := run()
	fmt.Fprintf(os.Stderr, "agentbox init: %v\n", err)
	os.Exit(1)
}

// initState is the live init: its spawner, the commands it runs, and the
// reaper that collects them.
type initState struct {
	cfg     *control.Config
	sp      *spawner
	report  string
	mu      sync.Mutex // held across fork+register and across reaping
	waiters map[int]chan syscall.WaitStatus
	pending []*group // command groups not yet empty
	seq     atomic.Uint64
	trim    *idleTrim
	idle    *idleClock // nil without an idle timeout
}

func run() error {
	args, err := control.ParseArgs(os.Args[1:])
	if err != nil {
		return err
	}
	// The spawning thread's goroutine is made first: the runtime starts
	// threads for new goroutines one after the other (~0.3 ms each here),
	// oldest goroutine first, and the root soon waits for this one.
	sp := startSpawner(args)
	// No signal from inside the sandbox may end the init. The kernel
	// drops every signal sent to a pid namespace's init that it has no
	// handler for (only SIGKILL and SIGSTOP from an ancestor namespace
	// get through: that is how the client ends it), whatever its code or
	// target thread. Go installs a handler for almost every signal, and
	// exits (HUP, INT, TERM), dumps (QUIT, ABRT, ...) or crashes on a
	// fault signal it takes for a real one (SEGV sent with sigqueue, say):
	// so the init gives every signal the default disposition back (see
	// defaultSignals) but the two its runtime needs, SIGURG (preemption)
	// and SIGCHLD, which it subscribes to for the reaper. A real fault in
	// the init now ends it without a Go traceback, as the kernel's
	// default. Commands start with default dispositions either way.
	// Subscribing takes ~0.5 ms here (the runtime's signal thread must
	// start first): it runs alongside the set-up, and the init waits for
	// it before it reports ready, that is before any command can exist
	// (a SIGCHLD delivered before signal.Notify would be lost, and its
	// command never reaped).
	caught := make(chan struct{})
	children := make(chan os.Signal, 16)
	go func() {
		signal.Notify(children, syscall.SIGCHLD)
		close(caught)
	}()
	if err := defaultSignals(); err != nil {
		return err
	}
	for fd := control.FdSetup; fd < control.FdJoinFirst+args.Join; fd++ {
		unix.CloseOnExec(fd) // inherited descriptors must not reach commands
	}
	setupConn, err := fileUnixConn(control.FdSetup, "setup")
	if err != nil {
		return err
	}
	var cfg control.Config
	passed, err := control.Recv(setupConn, &cfg, control.MaxPacket)
	if err != nil {
		return fmt.Errorf("read config: %w", err)
	}
	sources, err := placeDescriptors(passed, cfg.Sources())
	if err != nil {
		_ = control.Send(setupConn, control.Ready{Error: err.Error()})
		return err
	}
	if err := closeInherited(control.FdJoinFirst + args.Join); err != nil {
		_ = control.Send(setupConn, control.Ready{Error: err.Error()})
		return err
	}
	// Meanwhile the spawning thread joins the session's cgroups, each by
	// writing itself in (see moveSelf: no RCU grace period), and drops
	// its privileges; landlock follows the root.
	st, err := prepareInit(&cfg, sources, sp, children)
	if err != nil {
		_ = control.Send(setupConn, control.Ready{Error: err.Error()})
		return err
	}
	ln, err := fileUnixListener(control.FdControl)
	if err != nil {
		_ = control.Send(setupConn, control.Ready{Error: err.Error()})
		return err
	}
	<-caught
	if err := control.Send(setupConn, control.Ready{Landlock: st.report}); err != nil {
		return fmt.Errorf("report ready: %w", err)
	}
	_ = setupConn.Close()
	// An idle session should cost the host little: return the set-up's
	// garbage once the session first goes quiet (not now: see idleTrim).
	st.trim = startIdleTrim()
	if cfg.SessionTimeout > 0 {
		// The session's clock starts when it is ready, as the client's.
		time.AfterFunc(time.Duration(cfg.SessionTimeout), func() {
			fmt.Fprintln(os.Stderr, "agentbox init: session timeout reached; ending the session")
			os.Exit(3)
		})
	}
	if cfg.IdleTimeout > 0 {
		st.idle = startIdleClock(time.Duration(cfg.IdleTimeout), func() {
			fmt.Fprintf(os.Stderr, "agentbox init: idle for %s (the idle timeout); ending the session\n", time.Duration(cfg.IdleTimeout))
			os.Exit(3)
		})
	}
	return st.serve(ln)
}

// defaultSignals sets the kernel's default disposition for every signal
// but SIGKILL and SIGSTOP (which have no other), SIGCHLD and SIGURG,
// behind the runtime's back: os/signal can only catch a signal or ignore
// it, and an ignored one would be inherited by every command. The
// runtime installs no handler again for a signal nobody subscribes to.
func defaultSignals() error {
	var act [4]uint64 // struct sigaction, zeroed: SIG_DFL, no flags, empty mask
	for sig := syscall.Signal(1); sig <= 64; sig++ {
		switch sig {
		case syscall.SIGKILL, syscall.SIGSTOP, syscall.SIGCHLD, syscall.SIGURG:
			continue
		}
		if _, _, errno := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&act)), 0, 8, 0, 0); errno != 0 {
			return fmt.Errorf("reset the disposition of signal %d: %w", sig, errno)
		}
	}
	return nil
}

// placeDescriptors puts what came with the config where the init uses
// it: the control socket at control.FdControl, the log on stdout and
// stderr. Those numbers hold placeholders from the init's start, so no
// received descriptor has one of them and no other descriptor of this
// process is replaced. (The group directories came with the start
// itself.) It returns the sources (the workspace's, then the mounts'),
// which stay open, close-on-exec, until the root is built.
func placeDescriptors(files []*os.File, sources int) ([]*os.File, error) {
	if len(files) != 2+sources {
		control.CloseAll(files)
		return nil, fmt.Errorf("the config came with %d descriptors, want %d", len(files), 2+sources)
	}
	defer control.CloseAll(files[:2])
	place := func(f *os.File, fd, flags int) error {
		if err := unix.Dup3(int(f.Fd()), fd, flags); err != nil {
			return fmt.Errorf("place descriptor %d: %w", fd, err)
		}
		return nil
	}
	if err := place(files[0], control.FdControl, unix.O_CLOEXEC); err != nil {
		control.CloseAll(files[2:])
		return nil, err
	}
	for _, fd := range []int{1, 2} {
		if err := place(files[1], fd, 0); err != nil {
			control.CloseAll(files[2:])
			return nil, err
		}
	}
	return files[2:], nil
}

// closeInherited closes every descriptor the init inherited beyond the
// ones it was given (stdio, the setup and control sockets, the group
// directories below keep). Threat: a host process that started agentbox
// holding a descriptor without close-on-exec (a file, a directory, a
// pipe) would otherwise pass it on to every command, and a directory
// descriptor leads straight out of the sandbox's root. The runtime's own
// descriptors are close-on-exec and are left alone.
func closeInherited(keep int) error {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("list inherited descriptors: %w", err)
	}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd < keep {
			continue
		}
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil || flags&unix.FD_CLOEXEC != 0 {
			continue
		}
		if err := unix.Close(fd); err != nil && err != unix.EBADF {
			return fmt.Errorf("close inherited descriptor %d: %w", fd, err)
		}
	}
	return nil
}

// prepareInit builds the sandbox around the init (on the workspace and
// mount sources that came as descriptors), confines the spawning thread
// and starts the reaper, which children delivers SIGCHLD to.
func prepareInit(cfg *control.Config, sources []*os.File, sp *spawner, children <-chan os.Signal) (*initState, error) {
	// The host name and the loopback belong to the session's own uts and
	// net namespaces, not to its mounts: they are set up beside the root.
	named := make(chan error, 1)
	go func() {
		if err := unix.Sethostname([]byte(hostname)); err != nil {
			named <- fmt.Errorf("set host name: %w", err)
			return
		}
		if cfg.Network != "host" {
			named <- loopbackUp()
			return
		}
		named <- nil
	}()
	err := buildRoot(cfg, sources)
	control.CloseAll(sources)
	if nerr := <-named; err == nil {
		err = nerr
	}
	if err != nil {
		return nil, err
	}
	if err := setRlimits(cfg); err != nil {
		return nil, err
	}
	report, err := sp.confine(cfg)
	if err != nil {
		return nil, err
	}
	st := &initState{cfg: cfg, sp: sp, report: report, waiters: map[int]chan syscall.WaitStatus{}}
	go st.reap(children)
	return st, nil
}

// setRlimits bounds what one command may do to the session's disk and
// descriptors; rlimits are per process and inherited, so setting them in
// the init sets them for every command.
func setRlimits(cfg *control.Config) error {
	limits := []struct {
		res int
		val uint64
	}{
		{unix.RLIMIT_CORE, 0},
		{unix.RLIMIT_FSIZE, uint64(cfg.FileSize)},
		{unix.RLIMIT_NOFILE, cfg.NoFile},
	}
	for _, l := range limits {
		// syscall.Setrlimit (not unix.) so the runtime does not restore
		// its saved RLIMIT_NOFILE in forked children.
		if err := syscall.Setrlimit(l.res, &syscall.Rlimit{Cur: l.val, Max: l.val}); err != nil {
			return fmt.Errorf("set rlimit %d to %d: %w", l.res, l.val, err)
		}
	}
	return nil
}
