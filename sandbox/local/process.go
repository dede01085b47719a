package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/sandbox"
)

// defaultPath is the PATH commands get unless the spec sets one.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// process is one command started in its own process group (its own
// session, with a TTY).
type process struct {
	s    *session
	cmd  *exec.Cmd
	pgid int

	stdin  io.WriteCloser
	stdout io.Reader
	stderr io.Reader
	tty    *os.File // the pty master, with TTY
	files  []*os.File

	done          chan struct{} // closed when the leader is reaped
	streams       sync.WaitGroup
	drained       chan struct{} // closed when every output stream ended
	killOnce      sync.Once
	status        sandbox.ExitStatus
	waitErr       error
	sessionKilled atomic.Bool
	releaseOnce   sync.Once
}

// environ is the command's whole environment: a minimal PATH and HOME,
// then the spec's, then the request's, then AGENTBOX_WORKSPACE. The host
// environment is never inherited.
func (s *session) environ(req sandbox.ExecRequest) []string {
	env := map[string]string{"PATH": defaultPath, "HOME": s.st.Workspace}
	if req.TTY {
		env["TERM"] = "xterm"
	}
	for k, v := range s.st.Spec.Env {
		env[k] = v
	}
	for k, v := range req.Env {
		env[k] = v
	}
	env["AGENTBOX_WORKSPACE"] = s.st.Workspace
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// lookPath finds name in the command's PATH (not agentbox's), relative
// entries taken from dir.
func lookPath(name, pathEnv, dir string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, d := range filepath.SplitList(pathEnv) {
		if d == "" {
			d = "."
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(dir, d)
		}
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", sandbox.Errorf(sandbox.ErrNotFound, "local: exec: command %q not found in PATH %s", name, pathEnv)
}

func (s *session) start(ctx context.Context, req sandbox.ExecRequest) (*process, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	err := s.usable("exec")
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	dir, err := s.hostDir(req.Workdir)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		if err == nil {
			err = fmt.Errorf("not a directory")
		}
		return nil, sandbox.Wrap("local: exec: workdir "+req.Workdir, sandbox.ErrNotFound, err)
	}
	env := s.environ(req)
	pathEnv := defaultPath
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathEnv = v
		}
	}
	bin, err := lookPath(req.Cmd[0], pathEnv, dir)
	if err != nil {
		return nil, err
	}
	cmd := &exec.Cmd{Path: bin, Args: req.Cmd, Dir: dir, Env: env, SysProcAttr: &syscall.SysProcAttr{}}
	if s.who.set {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(s.who.uid), Gid: uint32(s.who.gid), Groups: []uint32{}}
	}
	p := &process{s: s, cmd: cmd, done: make(chan struct{}), drained: make(chan struct{})}
	var childEnds []*os.File
	if req.TTY {
		childEnds, err = p.setupTTY(req)
	} else {
		childEnds, err = p.setupPipes()
	}
	closeAll := func(fs []*os.File) {
		for _, f := range fs {
			f.Close()
		}
	}
	if err != nil {
		closeAll(p.files)
		return nil, sandbox.Wrap("local: exec "+req.Cmd[0], nil, err)
	}

	// Register before starting, under the lock, so that Close or Stop
	// racing with Start either refuses it or kills it.
	s.mu.Lock()
	if err := s.usable("exec"); err != nil {
		s.mu.Unlock()
		closeAll(childEnds)
		closeAll(p.files)
		return nil, err
	}
	s.prune()
	err = cmd.Start()
	if err == nil {
		p.pgid = cmd.Process.Pid
		s.procs[p] = struct{}{}
		s.began()
	}
	s.mu.Unlock()
	closeAll(childEnds)
	if err != nil {
		closeAll(p.files)
		kind := error(nil)
		if errors.Is(err, os.ErrNotExist) {
			kind = sandbox.ErrNotFound
		}
		return nil, sandbox.Wrap("local: exec "+req.Cmd[0], kind, err)
	}
	go p.reap()
	go func() { p.streams.Wait(); close(p.drained) }()
	return p, nil
}

// setupPipes gives the command its own process group and three pipes.
func (p *process) setupPipes() ([]*os.File, error) {
	p.cmd.SysProcAttr.Setpgid = true
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	p.files = append(p.files, inW)
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		return nil, err
	}
	p.files = append(p.files, outR)
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		outW.Close()
		return nil, err
	}
	p.files = append(p.files, errR)
	p.cmd.Stdin, p.cmd.Stdout, p.cmd.Stderr = inR, outW, errW
	p.stdin = inW
	p.stdout = p.newStream(outR)
	p.stderr = p.newStream(errR)
	return []*os.File{inR, outW, errW}, nil
}

// setupTTY gives the command a new session with a pseudo-terminal as its
// controlling terminal and standard streams.
func (p *process) setupTTY(req sandbox.ExecRequest) ([]*os.File, error) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		return nil, fmt.Errorf("open pseudo-terminal: %w", err)
	}
	p.files = append(p.files, ptmx)
	rows, cols := req.Rows, req.Cols
	if rows == 0 {
		rows = 24
	}
	if cols == 0 {
		cols = 80
	}
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: rows, Cols: cols}); err != nil {
		tty.Close()
		return nil, fmt.Errorf("set terminal size: %w", err)
	}
	if s := p.s; s.who.set {
		if err := tty.Chown(s.who.uid, s.who.gid); err != nil {
			tty.Close()
			return nil, fmt.Errorf("chown terminal: %w", err)
		}
	}
	p.cmd.SysProcAttr.Setsid = true
	p.cmd.SysProcAttr.Setctty = true
	p.cmd.SysProcAttr.Ctty = 0
	p.cmd.Stdin, p.cmd.Stdout, p.cmd.Stderr = tty, tty, tty
	p.tty = ptmx
	p.stdin = &ttyStdin{f: ptmx}
	p.stdout = p.newStream(ptmx)
	p.stderr = strings.NewReader("")
	return []*os.File{tty}, nil
}

// reap waits for the leader and records how it ended.
func (p *process) reap() {
	defer close(p.done)
	defer p.s.ended()
	err := p.cmd.Wait()
	ps := p.cmd.ProcessState
	if ps == nil {
		p.waitErr = sandbox.Wrap("local: wait", nil, err)
		return
	}
	ws, _ := ps.Sys().(syscall.WaitStatus)
	switch {
	case ws.Signaled():
		p.status.ExitCode = 128 + int(ws.Signal())
		p.status.Signal = unix.SignalName(ws.Signal())
	default:
		p.status.ExitCode = ps.ExitCode()
	}
	if p.sessionKilled.Load() {
		p.status.TimedOut = true
		p.status.Violations = append(p.status.Violations, sandbox.SessionTimeoutViolation(p.s.st.Spec.Policy.Resources.SessionTimeout))
	}
}

func (p *process) Stdin() io.WriteCloser { return p.stdin }
func (p *process) Stdout() io.Reader     { return p.stdout }
func (p *process) Stderr() io.Reader     { return p.stderr }

func (p *process) Resize(ctx context.Context, rows, cols uint16) error {
	if p.tty == nil {
		return sandbox.Errorf(sandbox.ErrInvalid, "local: resize: process %d has no terminal", p.pgid)
	}
	if err := pty.Setsize(p.tty, &pty.Winsize{Rows: rows, Cols: cols}); err != nil {
		return sandbox.Wrap(fmt.Sprintf("local: resize terminal of process %d to %dx%d", p.pgid, rows, cols), nil, err)
	}
	return nil
}

// Kill sends SIGKILL to the command's process group: the command and every
// process it started that did not leave the group. A process that left the
// group (setsid) survives; so that it cannot hold the output streams open
// forever, they are closed killGrace after the kill if still open.
func (p *process) Kill(ctx context.Context) error {
	err := p.killGroup()
	p.killOnce.Do(func() {
		go func() {
			t := time.NewTimer(killGrace)
			defer t.Stop()
			select {
			case <-p.drained:
			case <-t.C:
				p.release()
			}
		}()
	})
	return err
}

// killGrace is how long the streams may keep delivering buffered output
// after a kill.
const killGrace = 500 * time.Millisecond

// newStream wraps a parent-side output stream; drained closes when every
// stream has reached its end.
func (p *process) newStream(f *os.File) io.Reader {
	p.streams.Add(1)
	return &eofCloser{f: f, done: p.streams.Done}
}

func (p *process) killGroup() error {
	if err := unix.Kill(-p.pgid, unix.SIGKILL); err != nil && err != unix.ESRCH {
		return sandbox.Wrap(fmt.Sprintf("local: kill process group %d", p.pgid), nil, err)
	}
	return nil
}

func (p *process) Wait(ctx context.Context) (sandbox.ExitStatus, error) {
	select {
	case <-p.done:
		return p.status, p.waitErr
	case <-ctx.Done():
		return sandbox.ExitStatus{}, sandbox.Wrap(fmt.Sprintf("local: wait for process %d", p.pgid), nil, ctx.Err())
	}
}

// Close kills the command's process group if the command still runs and
// closes the parent's ends of its streams.
func (p *process) Close() error {
	select {
	case <-p.done:
	default:
		_ = p.killGroup()
	}
	p.release()
	return nil
}

// release closes the parent's ends of the streams.
func (p *process) release() {
	p.releaseOnce.Do(func() {
		for _, f := range p.files {
			f.Close()
		}
	})
}

// eofCloser closes its file at end of stream; EIO from a pty master whose
// terminal side is gone is the end of stream.
type eofCloser struct {
	f    *os.File
	done func()
	once sync.Once
}

func (r *eofCloser) Read(b []byte) (int, error) {
	n, err := r.f.Read(b)
	if err != nil {
		r.once.Do(func() { r.f.Close(); r.done() })
		if errors.Is(err, syscall.EIO) || errors.Is(err, os.ErrClosed) {
			err = io.EOF
		}
	}
	return n, err
}

// ttyStdin writes to the terminal; Close sends end-of-file (^D) instead of
// closing the terminal, which also carries the output.
type ttyStdin struct {
	f      *os.File
	mu     sync.Mutex
	closed bool
}

func (w *ttyStdin) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return 0, os.ErrClosed
	}
	return w.f.Write(b)
}

func (w *ttyStdin) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	_, err := w.f.Write([]byte{4})
	if errors.Is(err, syscall.EIO) || errors.Is(err, os.ErrClosed) {
		return nil
	}
	return err
}
