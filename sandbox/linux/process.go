package linux

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/agentbox/agentbox/sandbox/linux/control"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/creack/pty"
)

// process is a command started in a session: its stdio ends on the client
// side and its control connection to the init.
type process struct {
	s      *session
	conn   *net.UnixConn
	stdin  io.WriteCloser
	stdout io.Reader
	stderr io.Reader
	files  []*os.File // client ends, closed by release
	pty    *os.File

	oomBefore uint64
	timeout   time.Duration // the limit the init enforces
	denBefore uint64

	killOnce  sync.Once
	closeOnce sync.Once
	waitOnce  sync.Once
	status    sandbox.ExitStatus
	werr      error
}

// Start runs a command in the session and streams it.
func (s *session) Start(ctx context.Context, req sandbox.ExecRequest) (_ sandbox.Process, err error) {
	const op = "linux: exec"
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if err := s.live("exec"); err != nil {
		return nil, err
	}
	if err := s.refuseIfPaused("exec"); err != nil {
		return nil, err
	}
	dir, err := s.cwd(req.Workdir)
	if err != nil {
		return nil, err
	}
	p := &process{s: s, oomBefore: s.g.OOMKills(), timeout: req.EffectiveTimeout(s.policy())}
	if e := s.egressRef(); e != nil {
		p.denBefore = e.denialCount()
	}
	var remote []*os.File // the command's ends, sent to the init then closed here
	defer func() {
		control.CloseAll(remote)
		if err != nil {
			p.Close()
		}
	}()
	if req.TTY {
		master, tty, err := openSandboxPTY(s.h.InitPID)
		if err != nil {
			return nil, sandbox.Wrap(op, nil, fmt.Errorf("open a pseudo-terminal: %w", err))
		}
		rows, cols := req.Rows, req.Cols
		if rows == 0 || cols == 0 {
			rows, cols = 24, 80
		}
		_ = pty.Setsize(master, &pty.Winsize{Rows: rows, Cols: cols})
		remote = append(remote, tty)
		p.pty = master
		p.files = append(p.files, master)
		p.stdin = ttyInput{master}
		p.stdout = ttyOutput{master}
		p.stderr = strings.NewReader("")
	} else {
		var ends [3][2]*os.File
		for i := range ends {
			r, w, err := os.Pipe()
			if err != nil {
				control.CloseAll(p.files)
				return nil, sandbox.Wrap(op, nil, fmt.Errorf("create pipes: %w", err))
			}
			ends[i] = [2]*os.File{r, w}
		}
		remote = append(remote, ends[0][0], ends[1][1], ends[2][1])
		p.files = append(p.files, ends[0][1], ends[1][0], ends[2][0])
		p.stdin, p.stdout, p.stderr = ends[0][1], ends[1][0], ends[2][0]
	}
	c, err := s.dial("exec")
	if err != nil {
		return nil, err
	}
	p.conn = c
	if d, ok := ctx.Deadline(); ok {
		_ = c.SetWriteDeadline(d)
	}
	timeout := req.EffectiveTimeout(s.policy())
	if err := control.Send(c, control.Request{Op: control.OpExec, Cmd: req.Cmd, Dir: dir, Env: s.env(req), TTY: req.TTY, Timeout: int64(timeout)}, remote...); err != nil {
		return nil, sandbox.Wrap(op, nil, fmt.Errorf("send %q to the init: %w", req.Cmd[0], err))
	}
	control.CloseAll(remote)
	remote = nil
	var r control.Reply
	if _, err := control.Recv(c, &r, control.MaxReply); err != nil {
		return nil, sandbox.Wrap(op, sandbox.ErrClosed, fmt.Errorf("start %q: init did not answer: %w", req.Cmd[0], err))
	}
	if r.Error != "" {
		kind := error(nil)
		if r.NotFound {
			kind = sandbox.ErrNotFound
		}
		if n := s.policy().Resources.Pids; r.Again && n > 0 {
			return nil, sandbox.Wrap(op, nil, fmt.Errorf("start %s: the session's limit of %d processes and threads is reached, so the kernel refused one more (the sandbox's own spawning thread counts as one): the limit is too low for this command, raise --pids (policy pids)", req.Cmd[0], n))
		}
		return nil, sandbox.Wrap(op, kind, errors.New(r.Error))
	}
	_ = c.SetWriteDeadline(time.Time{})
	if req.Stdin != nil {
		sandbox.FeedStdin(p, req.Stdin)
	}
	return p, nil
}

func (p *process) Stdin() io.WriteCloser { return p.stdin }
func (p *process) Stdout() io.Reader     { return p.stdout }
func (p *process) Stderr() io.Reader     { return p.stderr }

// Resize changes the terminal size of a TTY process.
func (p *process) Resize(ctx context.Context, rows, cols uint16) error {
	if p.pty == nil {
		return sandbox.Errorf(sandbox.ErrInvalid, "linux: resize: the process has no terminal")
	}
	if err := pty.Setsize(p.pty, &pty.Winsize{Rows: rows, Cols: cols}); err != nil {
		return sandbox.Wrap("linux: resize", nil, err)
	}
	return nil
}

// Kill asks the init to kill the command's whole tree.
func (p *process) Kill(ctx context.Context) error {
	var err error
	p.killOnce.Do(func() {
		err = control.Send(p.conn, control.Request{Op: control.OpKill})
	})
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return sandbox.Wrap("linux: kill", nil, err)
	}
	return nil
}

// Wait waits for the exit report and adds what the backend observed: an
// OOM kill in the session's memory group, refused egress.
func (p *process) Wait(ctx context.Context) (sandbox.ExitStatus, error) {
	p.waitOnce.Do(func() {
		// No goroutine per wait: one runs only if ctx ends first.
		stop := context.AfterFunc(ctx, func() { _ = p.conn.SetReadDeadline(time.Now()) })
		defer stop()
		var r control.Reply
		for {
			if _, err := control.Recv(p.conn, &r, control.MaxReply); err != nil {
				if p.s.pastDeadline() {
					// The init ended the session at its timeout, and the
					// command with it.
					p.status = sandbox.ExitStatus{ExitCode: 137, Signal: "SIGKILL", TimedOut: true,
						Violations: []string{sandbox.SessionTimeoutViolation(p.s.policy().Resources.SessionTimeout)}}
					return
				}
				p.werr = sandbox.Wrap("linux: wait", sandbox.ErrClosed, fmt.Errorf("lost the init before the command's exit: %w", err))
				if ctx.Err() != nil {
					p.werr = sandbox.Wrap("linux: wait", nil, ctx.Err())
				}
				return
			}
			if r.Exited != nil {
				break
			}
		}
		e := r.Exited
		p.status = sandbox.ExitStatus{ExitCode: e.Code, Signal: e.Signal}
		if e.TimedOut {
			p.status.TimedOut = true
			p.status.Violations = append(p.status.Violations, sandbox.ExecTimeoutViolation(p.timeout))
		}
		if (e.Signal == "SIGKILL" || e.Code == 137) && p.s.g.OOMKills() > p.oomBefore {
			p.status.OOMKilled = true
			p.status.Violations = append(p.status.Violations, sandbox.OOMViolation(p.s.policy().Resources.MemoryBytes))
		}
		if e := p.s.egressRef(); e != nil {
			p.status.Violations = append(p.status.Violations, e.denialsSince(p.denBefore)...)
		}
		_ = p.conn.Close()
	})
	return p.status, p.werr
}

// Close closes the client's ends of the command's stdio and its control
// connection, which kills the command's tree if it still runs.
func (p *process) Close() error {
	p.closeOnce.Do(func() {
		control.CloseAll(p.files)
		if p.conn != nil {
			_ = p.conn.Close()
		}
	})
	return nil
}

// ttyInput writes to a terminal; Close sends end-of-file (^D) rather
// than hanging the terminal up.
type ttyInput struct{ f *os.File }

func (t ttyInput) Write(b []byte) (int, error) { return t.f.Write(b) }
func (t ttyInput) Close() error {
	_, err := t.f.Write([]byte{4})
	return err
}

// ttyOutput reads a terminal; the EIO a master returns once the last
// slave is closed is the end of the stream.
type ttyOutput struct{ f *os.File }

func (t ttyOutput) Read(b []byte) (int, error) {
	n, err := t.f.Read(b)
	if err != nil && n == 0 && !errors.Is(err, os.ErrClosed) {
		var pe *os.PathError
		if errors.As(err, &pe) {
			return 0, io.EOF
		}
	}
	return n, err
}
