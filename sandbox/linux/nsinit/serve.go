package nsinit

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/agentbox/agentbox/sandbox/linux/control"
	"golang.org/x/sys/unix"
)

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
	var req control.Request
	files, err := control.Recv(c, &req, control.MaxPacket)
	if err != nil {
		return
	}
	// Every request is a use of the session but a probe (OpInfo: session
	// ls, Resume), and a command's lasts until it is reported.
	if st.idle != nil && req.Op != control.OpInfo {
		st.idle.busy()
		defer st.idle.done()
	}
	switch req.Op {
	case control.OpExtend:
		control.CloseAll(files)
		_ = control.Send(c, control.Reply{})
	case control.OpInfo:
		control.CloseAll(files)
		_ = control.Send(c, control.Reply{Info: &control.Info{ID: st.cfg.ID, Landlock: st.report}})
	case control.OpListen:
		control.CloseAll(files)
		if req.CACert != "" {
			if err := writeTrustBundle(req.CACert); err != nil {
				_ = control.Send(c, control.Reply{Error: err.Error()})
				return
			}
		}
		st.listen(c, req.Port)
	case control.OpConnect:
		control.CloseAll(files)
		st.connect(c, req.Port)
	case control.OpExec:
		st.exec(c, req, files)
	default:
		control.CloseAll(files)
		_ = control.Send(c, control.Reply{Error: fmt.Sprintf("unknown op %q", req.Op)})
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
		_ = control.Send(c, control.Reply{Error: err.Error()})
		return
	}
	defer ln.Close()
	f, err := ln.File()
	if err != nil {
		_ = control.Send(c, control.Reply{Error: err.Error()})
		return
	}
	defer f.Close()
	_ = control.Send(c, control.Reply{}, f)
}

// connect connects to port on the sandbox's loopback and sends the
// connected socket: the client relays an exposed port from outside the
// sandbox with it. The client checked the port against the spec; the
// init connects only to its own 127.0.0.1, so nothing beyond the
// sandbox's loopback is reached this way whatever a client asks.
func (st *initState) connect(c *net.UnixConn, port int) {
	if port < 1 || port > 65535 {
		_ = control.Send(c, control.Reply{Error: fmt.Sprintf("port %d out of range", port)})
		return
	}
	conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 5*time.Second)
	if err != nil {
		_ = control.Send(c, control.Reply{Error: err.Error(), NotFound: errors.Is(err, unix.ECONNREFUSED)})
		return
	}
	defer conn.Close()
	f, err := conn.(*net.TCPConn).File()
	if err != nil {
		_ = control.Send(c, control.Reply{Error: err.Error()})
		return
	}
	defer f.Close()
	_ = control.Send(c, control.Reply{}, f)
}

// exec starts one command on the descriptors that came with the request,
// reports its pid, then its exit; a kill request or the client hanging up
// kills the command's whole tree.
func (st *initState) exec(c *net.UnixConn, req control.Request, files []*os.File) {
	want := 3
	if req.TTY {
		want = 1
	}
	if len(req.Cmd) == 0 || len(files) != want {
		control.CloseAll(files)
		_ = control.Send(c, control.Reply{Error: fmt.Sprintf("exec needs a command and %d descriptors, got %d", want, len(files))})
		return
	}
	path, err := lookPath(req.Cmd[0], envValue(req.Env, "PATH"))
	if err != nil {
		control.CloseAll(files)
		_ = control.Send(c, control.Reply{Error: fmt.Sprintf("command %q not found in the sandbox's PATH", req.Cmd[0]), NotFound: true})
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
	control.CloseAll(files)
	if err != nil {
		if pidfd >= 0 {
			_ = unix.Close(pidfd)
		}
		notFound := errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EACCES)
		_ = control.Send(c, control.Reply{Error: fmt.Sprintf("start %s in %s: %v", path, req.Dir, err), NotFound: notFound && !strings.Contains(err.Error(), "chdir"), Again: errors.Is(err, unix.EAGAIN)})
		return
	}
	if err := control.Send(c, control.Reply{Pid: pid}); err != nil {
		g.kill(pid)
	}
	var killed, timedOut atomic.Bool
	done := make(chan struct{})
	hungUp := make(chan struct{})
	if req.Timeout > 0 {
		t := time.AfterFunc(time.Duration(req.Timeout), func() {
			select {
			case <-done:
			default:
				timedOut.Store(true)
				killed.Store(true)
				g.kill(pid)
			}
		})
		defer t.Stop()
	}
	go func() {
		// Each further packet is a kill request: it kills the command's
		// whole tree, even after the command itself has exited (its
		// children may hold the output open). EOF, the client gone, kills
		// a command that still runs, so commands never outlive whoever
		// waits for them; what a finished command left in the background
		// stays, as it would in a shell.
		defer close(hungUp)
		for {
			var r control.Request
			_, err := control.Recv(c, &r, 4096)
			if err != nil {
				select {
				case <-done:
				default:
					killed.Store(true)
					g.kill(pid)
				}
				return
			}
			if r.Op == control.OpKill {
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
	rep := &control.ExitReport{Code: ws.ExitStatus(), Killed: killed.Load(), TimedOut: timedOut.Load()}
	if ws.Signaled() {
		rep.Code = 128 + int(ws.Signal())
		rep.Signal = signalName(ws.Signal())
	}
	_ = control.Send(c, control.Reply{Exited: rep})
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
