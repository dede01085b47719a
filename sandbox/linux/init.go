package linux

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// initMarker is argv[0] of a re-executed agentbox that must serve as a
// session's init.
const initMarker = "agentbox-linux-init"

// init pins the sandbox init's main goroutine to the main thread, the
// thread-group leader. Threat: the confined spawning thread runs as the
// session user; were it the leader, the kernel's permission check for a
// signal sent to pid 1 would use its credentials, and a command running
// as root inside the sandbox could end its own session's init.
func init() {
	if len(os.Args) > 0 && os.Args[0] == initMarker {
		runtime.LockOSThread()
	}
}

// Main runs the sandbox init when this process was started as one, and
// never returns then; otherwise it returns at once. Call it first thing
// in main and in the TestMain of every package that starts sessions.
func Main() {
	if len(os.Args) == 0 || os.Args[0] != initMarker {
		return
	}
	err := runInit()
	fmt.Fprintf(os.Stderr, "agentbox init: %v\n", err)
	os.Exit(1)
}

// initState is the live init: its spawner, the commands it runs, and the
// reaper that collects them.
type initState struct {
	cfg     *initConfig
	sp      *spawner
	report  string
	mu      sync.Mutex // held across fork+register and across reaping
	waiters map[int]chan syscall.WaitStatus
	pending []*group // command groups not yet empty
	seq     atomic.Uint64
	trim    *idleTrim
}

func runInit() error {
	args, err := parseInitArgs(os.Args[1:])
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
	for fd := fdSetup; fd < fdJoinFirst+args.Join; fd++ {
		unix.CloseOnExec(fd) // inherited descriptors must not reach commands
	}
	setupConn, err := fileUnixConn(fdSetup, "setup")
	if err != nil {
		return err
	}
	var cfg initConfig
	passed, err := recv(setupConn, &cfg, maxPacket)
	if err != nil {
		return fmt.Errorf("read config: %w", err)
	}
	if err := placeDescriptors(passed); err != nil {
		_ = send(setupConn, initReady{Error: err.Error()})
		return err
	}
	if err := closeInherited(fdJoinFirst + args.Join); err != nil {
		_ = send(setupConn, initReady{Error: err.Error()})
		return err
	}
	// Meanwhile the spawning thread joins the session's cgroups, each by
	// writing itself in (see moveSelf: no RCU grace period), and drops
	// its privileges; landlock follows the root.
	st, err := prepareInit(&cfg, sp, children)
	if err != nil {
		_ = send(setupConn, initReady{Error: err.Error()})
		return err
	}
	ln, err := fileUnixListener(fdControl)
	if err != nil {
		_ = send(setupConn, initReady{Error: err.Error()})
		return err
	}
	<-caught
	if err := send(setupConn, initReady{Landlock: st.report}); err != nil {
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
// it: the control socket at fdControl, the log on stdout and stderr.
// Those numbers hold placeholders from the init's start, so no received
// descriptor has one of them and no other descriptor of this process is
// replaced. (The group directories came with the start itself.)
func placeDescriptors(files []*os.File) error {
	defer closeAll(files)
	if len(files) != 2 {
		return fmt.Errorf("the config came with %d descriptors, want 2", len(files))
	}
	place := func(f *os.File, fd, flags int) error {
		if err := unix.Dup3(int(f.Fd()), fd, flags); err != nil {
			return fmt.Errorf("place descriptor %d: %w", fd, err)
		}
		return nil
	}
	if err := place(files[0], fdControl, unix.O_CLOEXEC); err != nil {
		return err
	}
	for _, fd := range []int{1, 2} {
		if err := place(files[1], fd, 0); err != nil {
			return err
		}
	}
	return nil
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

// prepareInit builds the sandbox around the init, confines the spawning
// thread and starts the reaper, which children delivers SIGCHLD to.
func prepareInit(cfg *initConfig, sp *spawner, children <-chan os.Signal) (*initState, error) {
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
	err := buildRoot(cfg)
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
func setRlimits(cfg *initConfig) error {
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

// reap collects every child (the init is pid 1: orphans land here too)
// and hands the status of a command to whoever waits for it.
func (st *initState) reap(sigs <-chan os.Signal) {
	// A slow sweep backs the signal up (signals coalesce; nothing may
	// ever wait forever on a missed one).
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-sigs:
		case <-tick.C:
		}
		st.mu.Lock()
		for {
			var ws unix.WaitStatus
			pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
			if w, ok := st.waiters[pid]; ok {
				delete(st.waiters, pid)
				w <- syscall.WaitStatus(ws)
			}
		}
		st.pending = retryRemove(st.pending)
		st.mu.Unlock()
	}
}

func retryRemove(gs []*group) []*group {
	out := gs[:0]
	for _, g := range gs {
		if !g.remove() {
			out = append(out, g)
		}
	}
	return out
}

// serve accepts control connections until the init is told to stop.
func (st *initState) serve(ln *net.UnixListener) error {
	for {
		c, err := ln.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if st.trim != nil {
			st.trim.busy()
		}
		go st.handle(c)
	}
}

func (st *initState) handle(c *net.UnixConn) {
	defer c.Close()
	var req request
	files, err := recv(c, &req, maxPacket)
	if err != nil {
		return
	}
	switch req.Op {
	case opInfo:
		closeAll(files)
		_ = send(c, reply{Info: &initInfo{ID: st.cfg.ID, Landlock: st.report}})
	case opListen:
		closeAll(files)
		st.listen(c, req.Port)
	case opExec:
		st.exec(c, req, files)
	default:
		closeAll(files)
		_ = send(c, reply{Error: fmt.Sprintf("unknown op %q", req.Op)})
	}
}

// listen makes a TCP listener on the sandbox's loopback (port, or any
// when that is 0 or taken) and sends its descriptor: the client serves
// the egress proxy on it from outside the sandbox.
func (st *initState) listen(c *net.UnixConn, port int) {
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
	if err != nil && port != 0 {
		ln, err = net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	}
	if err != nil {
		_ = send(c, reply{Error: err.Error()})
		return
	}
	defer ln.Close()
	f, err := ln.File()
	if err != nil {
		_ = send(c, reply{Error: err.Error()})
		return
	}
	defer f.Close()
	_ = send(c, reply{}, f)
}

// exec starts one command on the descriptors that came with the request,
// reports its pid, then its exit; a kill request or the client hanging up
// kills the command's whole tree.
func (st *initState) exec(c *net.UnixConn, req request, files []*os.File) {
	want := 3
	if req.TTY {
		want = 1
	}
	if len(req.Cmd) == 0 || len(files) != want {
		closeAll(files)
		_ = send(c, reply{Error: fmt.Sprintf("exec needs a command and %d descriptors, got %d", want, len(files))})
		return
	}
	path, err := lookPath(req.Cmd[0], envValue(req.Env, "PATH"))
	if err != nil {
		closeAll(files)
		_ = send(c, reply{Error: fmt.Sprintf("command %q not found in the sandbox's PATH", req.Cmd[0]), NotFound: true})
		return
	}
	fds := make([]uintptr, 3)
	for i := range fds {
		fds[i] = files[min(i, len(files)-1)].Fd()
	}
	attr := &syscall.ProcAttr{
		Dir:   req.Dir,
		Env:   req.Env,
		Files: fds,
		Sys: &syscall.SysProcAttr{
			Setsid:  true,
			Setctty: req.TTY,
			Ctty:    0,
		},
	}
	// Rootless, setgroups is denied in the user namespace (an unprivileged
	// gid map requires it) and the init has no supplementary groups to
	// drop anyway.
	attr.Sys.Credential = &syscall.Credential{Uid: uint32(st.cfg.UID), Gid: uint32(st.cfg.GID), Groups: []uint32{}, NoSetGroups: st.cfg.Rootless}
	pidfd := -1 // CLONE_PIDFD: always close-on-exec
	attr.Sys.PidFD = &pidfd
	exited := make(chan syscall.WaitStatus, 1)
	st.sp.acquire()
	st.mu.Lock()
	pid, g, err := st.sp.spawn(st.seq.Add(1), path, req.Cmd, attr)
	if err == nil {
		st.waiters[pid] = exited
	}
	st.mu.Unlock()
	closeAll(files)
	if err != nil {
		if pidfd >= 0 {
			_ = unix.Close(pidfd)
		}
		notFound := errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EACCES)
		_ = send(c, reply{Error: fmt.Sprintf("start %s in %s: %v", path, req.Dir, err), NotFound: notFound && !strings.Contains(err.Error(), "chdir")})
		return
	}
	if err := send(c, reply{Pid: pid}); err != nil {
		g.kill(pid)
	}
	var killed atomic.Bool
	done := make(chan struct{})
	hungUp := make(chan struct{})
	go func() {
		// Each further packet is a kill request: it kills the command's
		// whole tree, even after the command itself has exited (its
		// children may hold the output open). EOF, the client gone, kills
		// a command that still runs, so commands never outlive whoever
		// waits for them; what a finished command left in the background
		// stays, as it would in a shell.
		defer close(hungUp)
		for {
			var r request
			_, err := recv(c, &r, 4096)
			if err != nil {
				select {
				case <-done:
				default:
					killed.Store(true)
					g.kill(pid)
				}
				return
			}
			if r.Op == opKill {
				select {
				case <-done:
				default:
					killed.Store(true)
				}
				g.kill(pid)
			}
		}
	}()
	ws := st.wait(pid, pidfd, exited)
	close(done)
	rep := &exitReport{Code: ws.ExitStatus(), Killed: killed.Load()}
	if ws.Signaled() {
		rep.Code = 128 + int(ws.Signal())
		rep.Signal = signalName(ws.Signal())
	}
	_ = send(c, reply{Exited: rep})
	<-hungUp
	if g != nil {
		<-g.left
	}
	if g != nil && !g.remove() {
		st.mu.Lock()
		st.pending = append(st.pending, g)
		st.mu.Unlock()
	}
}

// wait returns the exit status of command pid. With its pidfd it waits
// in the network poller and reaps the command itself as soon as it
// exits; the SIGCHLD reaper (which may win the race, and which collects
// orphans) delivers on exited otherwise. Reaping here saves the hand-offs
// from the signal handler to the reaper goroutine and on to this one.
func (st *initState) wait(pid, pidfd int, exited <-chan syscall.WaitStatus) syscall.WaitStatus {
	if pidfd < 0 {
		return <-exited
	}
	f, err := pidfdFile(pidfd)
	if err != nil {
		return <-exited
	}
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return <-exited
	}
	var ws syscall.WaitStatus
	reaped := false
	_ = rc.Read(func(uintptr) bool {
		st.mu.Lock()
		defer st.mu.Unlock()
		if _, ok := st.waiters[pid]; !ok {
			return true // the reaper has it (and pid may no longer be ours)
		}
		var uws unix.WaitStatus
		n, err := unix.Wait4(pid, &uws, unix.WNOHANG, nil)
		if n == pid && err == nil {
			delete(st.waiters, pid)
			ws, reaped = syscall.WaitStatus(uws), true
			return true
		}
		return err != nil // not yet exited: wait for the pidfd to turn readable
	})
	if reaped {
		return ws
	}
	return <-exited
}

// pidfdFile wraps a pidfd for the network poller (which only takes
// descriptors that are already non-blocking).
func pidfdFile(fd int) (*os.File, error) {
	if err := unix.SetNonblock(fd, true); err != nil {
		_ = unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), "pidfd"), nil
}

func envValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v
		}
	}
	return ""
}

func signalName(s syscall.Signal) string {
	if n := unix.SignalName(s); n != "" {
		return n
	}
	return fmt.Sprintf("signal %d", int(s))
}

func fileUnixConn(fd int, name string) (*net.UnixConn, error) {
	f := os.NewFile(uintptr(fd), name)
	if f == nil {
		return nil, fmt.Errorf("fd %d (%s) is not open", fd, name)
	}
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("use fd %d as %s socket: %w", fd, name, err)
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return nil, fmt.Errorf("fd %d (%s) is not a unix socket", fd, name)
	}
	return uc, nil
}

func fileUnixListener(fd int) (*net.UnixListener, error) {
	f := os.NewFile(uintptr(fd), "control")
	if f == nil {
		return nil, fmt.Errorf("control socket fd %d is not open", fd)
	}
	l, err := net.FileListener(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("use fd %d as the control socket: %w", fd, err)
	}
	ul, ok := l.(*net.UnixListener)
	if !ok {
		return nil, fmt.Errorf("control fd %d is not a unix listener", fd)
	}
	return ul, nil
}
