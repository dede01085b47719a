package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"
	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/sandbox"
)

// Docker has no "kill this exec" call, so every command runs under a
// wrapper that records its pid in the container's /tmp. The engine starts
// each exec as a session leader (runc calls setsid), so the command and
// everything it starts share that session id even after their parent
// dies; the killer SIGKILLs the command, then finds the rest in /proc by
// session id, process group or parent, and SIGKILLs them, repeating until
// a scan finds nothing (a forking process is caught on the next round).
//
// What escapes: a process that calls setsid() itself and whose parent is
// already gone when the killer scans. Stop and Close end those (they kill
// the whole container).
//
// The wrapper writes the pid file before checking for a kill request and
// the killer creates the request before reading the pid file, so a kill
// racing with the start is never lost: one of the two sees the other.
//
// The wrapper also removes the pid files of execs that have ended (their
// pid is gone), so a long session does not fill /tmp with them.
const wrapperScript = `for f in /tmp/.agentbox-exec-*; do case $f in *.kill|*\*) continue;; esac; read p <"$f" && [ -d /proc/$p ] || rm -f "$f"; done 2>/dev/null; { echo $$ >/tmp/.agentbox-exec-$0; } 2>/dev/null; [ -e /tmp/.agentbox-exec-$0.kill ] && kill -KILL $$; exec "$@"`

// ttyWrapperScript is wrapperScript for a terminal exec: it also sets the
// terminal size before the command starts, since engines before API 1.42
// ignore the size given at exec creation (a resize after start races with
// the command's first look at its terminal).
const ttyWrapperScript = `for f in /tmp/.agentbox-exec-*; do case $f in *.kill|*\*) continue;; esac; read p <"$f" && [ -d /proc/$p ] || rm -f "$f"; done 2>/dev/null; { echo $$ >/tmp/.agentbox-exec-$0; } 2>/dev/null; [ -e /tmp/.agentbox-exec-$0.kill ] && kill -KILL $$; [ "$1" -gt 0 ] && stty rows "$1" cols "$2" 2>/dev/null; shift 2; exec "$@"`

const killerScript = `: >/tmp/.agentbox-exec-$0.kill
read pid </tmp/.agentbox-exec-$0 2>/dev/null || exit 0
[ "$pid" -gt 1 ] 2>/dev/null || exit 0
# The command first: were its children killed first, it could see them
# die and exit normally before its turn.
kill -KILL "$pid" 2>/dev/null && echo main
tree=" $pid "
round=0
while [ $round -lt 50 ]; do
	round=$((round+1)); found=
	for d in /proc/[0-9]*; do
		p=${d#/proc/}
		[ "$p" = $$ ] && continue
		read -r line <$d/stat 2>/dev/null || continue
		set -- ${line##*) }
		[ "$1" = Z ] && continue
		case "$tree" in
		*" $4 "*|*" $3 "*|*" $2 "*|*" $p "*) tree="$tree$p "; kill -KILL $p 2>/dev/null && found=1 ;;
		esac
	done
	[ -z "$found" ] && break
done
rm -f /tmp/.agentbox-exec-$0 /tmp/.agentbox-exec-$0.kill`

// process is a command running through the exec API.
type process struct {
	s      *session
	execID string
	tag    string
	tty    bool
	conn   client.HijackedResponse

	stdin          *stdinWriter
	stdout, stderr *io.PipeReader
	copied         chan struct{} // the attach stream ended
	copyErr        error

	killed     atomic.Bool
	mainKilled atomic.Bool // the killer SIGKILLed the command itself
	denials0   int         // egress refusals before the start
	waitMu     sync.Mutex
	status     *sandbox.ExitStatus
	waitErr    error
}

func newTag() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// start creates and attaches an exec for req (already validated). Without
// withStdin the exec gets no standard input (EOF at once), which spares
// the engine a stdin stream: Exec uses it when the request has no Stdin.
func (s *session) start(ctx context.Context, req sandbox.ExecRequest, withStdin bool) (*process, error) {
	if req.Workdir != "" && !path.IsAbs(req.Workdir) {
		if _, err := sandbox.ResolveWorkspacePath(s.spec.Workdir, req.Workdir); err != nil {
			return nil, err
		}
	}
	tag := newTag()
	cmd := append([]string{"/bin/sh", "-c", wrapperScript, tag}, req.Cmd...)
	if req.TTY {
		cmd = append([]string{"/bin/sh", "-c", ttyWrapperScript, tag, strconv.Itoa(int(req.Rows)), strconv.Itoa(int(req.Cols))}, req.Cmd...)
	}
	opts := client.ExecCreateOptions{
		Cmd:          cmd,
		Env:          envList(req.Env),
		WorkingDir:   s.workdirOf(req.Workdir),
		TTY:          req.TTY,
		AttachStdin:  withStdin,
		AttachStdout: true,
		AttachStderr: true,
	}
	if req.TTY && req.Rows > 0 && req.Cols > 0 {
		opts.ConsoleSize = client.ConsoleSize{Height: uint(req.Rows), Width: uint(req.Cols)}
	}
	created, err := s.c.api.ExecCreate(ctx, s.containerID, opts)
	if err != nil {
		return nil, s.execError("create exec", err)
	}
	att, err := s.c.api.ExecAttach(ctx, created.ID, client.ExecAttachOptions{TTY: req.TTY, ConsoleSize: opts.ConsoleSize})
	if err != nil {
		return nil, s.execError("attach exec", err)
	}
	if req.TTY && req.Rows > 0 && req.Cols > 0 {
		// For images without stty: the engine's resize, right after start.
		go func() {
			_, _ = s.c.api.ExecResize(context.WithoutCancel(ctx), created.ID, client.ExecResizeOptions{Height: uint(req.Rows), Width: uint(req.Cols)})
		}()
	}
	p := &process{s: s, execID: created.ID, tag: tag, tty: req.TTY, conn: att.HijackedResponse, copied: make(chan struct{})}
	if s.proxy != nil {
		p.denials0 = len(s.proxy.Denials())
	}
	p.stdin = &stdinWriter{conn: &att.HijackedResponse, tty: req.TTY, closed: !withStdin}
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	p.stdout, p.stderr = outR, errR
	go func() {
		defer close(p.copied)
		var err error
		if req.TTY {
			_, err = io.Copy(outW, att.Reader)
		} else {
			_, err = stdcopy.StdCopy(outW, errW, att.Reader)
		}
		if errors.Is(err, io.ErrClosedPipe) {
			err = nil
		}
		p.copyErr = err
		outW.Close()
		errW.Close()
	}()
	return p, nil
}

// stdinWriter half-closes the attach connection on Close, so the command
// sees EOF while its output keeps flowing. With a terminal it types the
// EOF character (^D) instead, as a user would: the engine tears down a TTY
// exec's output when its input half-closes.
type stdinWriter struct {
	conn   *client.HijackedResponse
	tty    bool
	mu     sync.Mutex
	closed bool
}

func (w *stdinWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return 0, io.ErrClosedPipe
	}
	return w.conn.Conn.Write(b)
}

func (w *stdinWriter) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	if w.tty {
		_, err := w.conn.Conn.Write([]byte{4})
		return err
	}
	return w.conn.CloseWrite()
}

func (p *process) Stdin() io.WriteCloser { return p.stdin }
func (p *process) Stdout() io.Reader     { return p.stdout }
func (p *process) Stderr() io.Reader {
	return p.stderr
}

// Resize changes the exec's terminal size.
func (p *process) Resize(ctx context.Context, rows, cols uint16) error {
	if !p.tty {
		return sandbox.Errorf(sandbox.ErrInvalid, "docker: resize: the process has no terminal")
	}
	_, err := p.s.c.api.ExecResize(ctx, p.execID, client.ExecResizeOptions{Height: uint(rows), Width: uint(cols)})
	if err != nil {
		return p.s.execError("resize exec terminal", err)
	}
	return nil
}

// Kill SIGKILLs the command's process tree (see killerScript) through a
// second exec, then waits for the attach stream to end.
func (p *process) Kill(ctx context.Context) error {
	p.killed.Store(true)
	select {
	case <-p.copied:
		return nil
	default:
	}
	out, err := p.s.helperOutput(ctx, []string{"/bin/sh", "-c", killerScript, p.tag})
	if strings.Contains(string(out), "main") {
		// The killer's SIGKILL ended the command itself: report it so
		// even if the engine's exit code is late or was taken from a
		// dying wrapper.
		p.mainKilled.Store(true)
	}
	if err != nil {
		// The killer could not run (the pids limit is exhausted, say, by
		// the very fork bomb being killed): end the whole session rather
		// than leave the tree running.
		p.s.c.log.Warn("docker: could not kill the process tree from inside, killing the session's container", "session", p.s.id, "err", err)
		p.s.killAll(ctx, "its process tree could not be killed from inside ("+err.Error()+")")
	}
	select {
	case <-p.copied:
	case <-time.After(5 * time.Second):
		// The tree is dead; an open stream here means a process that
		// escaped by setsid holds the exec's terminal or pipes.
		p.conn.Close()
	case <-ctx.Done():
		p.conn.Close()
	}
	return nil
}

// Wait waits for the attach stream to end and the engine to report the
// exit code.
func (p *process) Wait(ctx context.Context) (sandbox.ExitStatus, error) {
	p.waitMu.Lock()
	defer p.waitMu.Unlock()
	if p.status != nil {
		return *p.status, p.waitErr
	}
	select {
	case <-p.copied:
	case <-ctx.Done():
		return sandbox.ExitStatus{}, sandbox.Wrap("docker: wait", nil, ctx.Err())
	}
	p.conn.Close()
	st, err := p.exitStatus(ctx)
	if p.s.proxy != nil {
		if d := p.s.proxy.Denials(); len(d) > p.denials0 {
			for _, line := range d[p.denials0:] {
				st.Violations = append(st.Violations, "egress denied: "+line)
			}
		}
	}
	if p.s.isExpired() {
		st.TimedOut = true
		if err == nil {
			err = sandbox.Wrap("docker: session "+p.s.id, sandbox.ErrTimeout, fmt.Errorf("the session's %s limit ended the command", p.s.spec.Policy.Resources.SessionTimeout))
		}
	}
	p.status, p.waitErr = &st, err
	return st, err
}

func (p *process) exitStatus(ctx context.Context) (sandbox.ExitStatus, error) {
	delay := time.Millisecond
	for {
		insp, err := p.s.c.api.ExecInspect(ctx, p.execID, client.ExecInspectOptions{})
		if err != nil {
			return sandbox.ExitStatus{}, p.s.execError("inspect exec", err)
		}
		if !insp.Running {
			code := insp.ExitCode
			if p.mainKilled.Load() {
				code = 128 + int(unix.SIGKILL)
			}
			return p.s.describeExit(ctx, code, p.killed.Load())
		}
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return sandbox.ExitStatus{}, sandbox.Wrap("docker: wait", nil, ctx.Err())
		}
		delay = min(delay*2, 50*time.Millisecond)
	}
}

// describeExit turns an exec's exit code into an ExitStatus: codes above
// 128 are deaths by signal (the engine reports 128+n); a SIGKILL that
// agentbox did not send is checked against the container's OOM counter.
func (s *session) describeExit(ctx context.Context, code int, killedByUs bool) (sandbox.ExitStatus, error) {
	st := sandbox.ExitStatus{ExitCode: code}
	if code > 128 && code < 128+65 {
		st.Signal = unix.SignalName(unix.Signal(code - 128))
	}
	if code == 128+int(unix.SIGKILL) && !killedByUs {
		if oom, err := s.oomKilledSince(ctx); err == nil && oom {
			st.OOMKilled = true
			st.Violations = append(st.Violations, fmt.Sprintf("memory limit %d bytes reached: killed by the OOM killer", s.spec.Policy.Resources.MemoryBytes))
		}
		if err := s.checkAlive(ctx); err != nil {
			return st, err
		}
	}
	return st, nil
}
