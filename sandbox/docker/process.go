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

	"github.com/agentbox/agentbox/internal/outpipe"
	"github.com/agentbox/agentbox/sandbox"
)

// Docker has no "kill this exec" call, so every command runs under a
// wrapper shell that tells agentbox its pid before it execs the command,
// and Kill SIGKILLs that pid from a second exec (killerScript). The engine
// starts each exec as a session leader (runc calls setsid), so the command
// and everything it starts share that session id even after their parent
// dies; the killer SIGKILLs the command, then finds the rest in /proc by
// session id, process group or parent, and SIGKILLs them, repeating until
// a scan finds nothing (a forking process is caught on the next round).
//
// The pid lives in the client's memory, never in the container: the
// command runs as the session user (1000 by default) and can write to
// /tmp, so a pid file there could be deleted or pointed elsewhere by the
// very command it is meant to kill. The wrapper prints "<tag> <pid>
// <starttime>" as the first line of its output and, without a terminal,
// waits for a "go" line on its standard input before it execs the
// command; agentbox sends it only after it has read the line. So the line
// has left the exec's stdout pipe before the command exists (a command may
// reopen /proc/self/fd/1 for reading and would otherwise take the line
// off the pipe and print one of its own). A terminal exec does not wait:
// the command cannot read the terminal's output side, and it does not
// know its tag (only the wrapper's argv holds it), so at worst it can
// flush the line unseen, and a kill with no pid known ends the whole
// container. The starttime guards against the pid being reused by another
// process after the command ended.
//
// Kill against start: the go-ahead and a kill take the same lock, so a
// kill before the go-ahead refuses it (the wrapper reads EOF and SIGKILLs
// itself; the command never starts) and one after it has the pid. A
// terminal exec's kill waits for the line, which comes before the command.
//
// What this does and does not guarantee, for any Spec.User, root included
// (a capability-less root has no more power here than the session user):
// the command and its tree cannot change which pid the kill targets. They
// can signal the killer, which runs as the same user (it has to: the
// container has no CAP_KILL, so only the same uid may signal the
// command): a killer that does not finish within helperWait gets the
// whole container killed, and the command's Wait says so. What
// escapes the tree scan: a process that calls setsid() itself and whose
// parent is already gone when the killer scans. Stop and Close end those
// (they kill the whole container). Such a process, or another exec running
// at the same time as the same user, can also reach a starting wrapper's
// pipes through /proc/<pid>/fd (take its line, send its "go"); that is
// another command attacking this one, not this command steering its own
// kill, and it has its own limits to answer to.
var wrapperScript = oomScore + marker + watchdog + `read -r a && [ "$a" = go ] || kill -KILL $$; w "$1" "$2"; shift 2; exec "$@"`

// ttyWrapperScript is wrapperScript for a terminal exec: it does not wait
// for a go-ahead (see above), and it sets the terminal size before the
// command starts, since engines before API 1.42 ignore the size given at
// exec creation (a resize after start races with the command's first look
// at its terminal).
var ttyWrapperScript = oomScore + marker + watchdog + `[ "$1" -gt 0 ] && stty rows "$1" cols "$2" 2>/dev/null; w "$3" "$4"; shift 4; exec "$@"`

// marker prints the wrapper's first line, "<tag> <pid> <starttime>" ($0
// is the tag), and keeps the start time in $s.
const marker = `m() { s=${20}; printf '%s %s %s\n' "$0" $$ "$s"; }; read -r l </proc/$$/stat; m ${l##*) }; `

// watchdog defines w SECONDS KILLER: the command's timeout, enforced
// inside the container, so that it holds when agentbox is gone (a
// detached session's exec whose agentbox was killed). A process of its
// own (forked twice: no child of the command, which may wait for all of
// its children; in its session, so a Kill takes it too) with no
// standard streams (the exec's output ends when the command's does)
// looks once a second whether the command (pid $$, start time $s) still
// runs, leaves when it does not, and at the deadline becomes the killer
// (exec: no fork needed, so a pids limit the command exhausted does not
// stop it). The deadline is read from /proc/uptime in whole seconds and
// rounded up, so it is never early and at most two seconds late.
const watchdog = `w() { [ "$1" -gt 0 ] 2>/dev/null || return 0; k=$2; ( (exec </dev/null >/dev/null 2>&1; read -r u _ </proc/uptime; d=$((${u%.*}+$1+1)); while read -r l </proc/$$/stat; do set -- ${l##*) }; [ "${20}" = "$s" ] || exit 0; read -r u _ </proc/uptime; [ "${u%.*}" -lt "$d" ] || exec sh -c "$k" $$ "$s"; sleep 1; done) & ) }; `

// oomScore starts both wrappers: the command gets commandOOMScore, which
// it inherits across the exec (quietly: an image whose /proc refuses it
// runs the command as it is).
var oomScore = "{ echo " + strconv.Itoa(commandOOMScore) + " >/proc/self/oom_score_adj; } 2>/dev/null; "

// killerScript kills the tree of pid $0 started at $1 (clock ticks since
// boot, field 22 of /proc/<pid>/stat).
const killerScript = `pid=$0 start=$1
[ "$pid" -gt 1 ] 2>/dev/null || exit 0
if read -r line </proc/$pid/stat 2>/dev/null; then
	# Another process under the pid means the command and its session
	# are gone: the kernel does not reuse a pid that still names a
	# session or process group.
	set -- ${line##*) }
	[ "${20}" = "$start" ] || exit 0
	# The command first: were its children killed first, it could see
	# them die and exit normally before its turn.
	kill -KILL "$pid" 2>/dev/null && echo main
fi
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
done`

const (
	// markerWait bounds how long a terminal exec's kill waits for the
	// wrapper's line before it kills the container instead.
	markerWait = 10 * time.Second
	// helperWait bounds a helper exec (the killer, the OOM probe): the
	// command can SIGSTOP the killer, or fill the pids limit.
	helperWait = 10 * time.Second
	// engineWait bounds one engine call that should answer at once (an
	// inspect, a container kill).
	engineWait = 10 * time.Second
	// removeWait bounds the container's removal in Close.
	removeWait = 30 * time.Second
	// exitAfterKill bounds how long Wait waits, after a Kill ended, for
	// the engine to see the exec end.
	exitAfterKill = 15 * time.Second
	// exitLag bounds the wait for the engine to note an exit once the
	// attach stream ended.
	exitLag = time.Second
	// containerLag bounds the wait for the engine to note that a
	// container's init died: it does so a moment after the kernel
	// killed every process in the container, and until then it calls
	// the container running and takes execs that cannot start.
	containerLag = 5 * time.Second
	// outputWindow is how much of one stream's output is held unread
	// before the attach stream is no longer read.
	outputWindow = 1 << 20
	// maxMarker is past the longest line a wrapper prints.
	maxMarker = 128
)

// The states of a start, as far as the wrapper's first line told.
const (
	launchPending = iota // the line has not been read
	launchRunning        // the command runs (or ran) as pid
	launchRefused        // killed before the go-ahead: the command never runs
	launchUnknown        // a terminal exec whose line never came
)

// process is a command running through the exec API.
type process struct {
	s      *session
	execID string
	tag    string
	tty    bool
	conn   client.HijackedResponse

	stdin          *stdinWriter
	stdout, stderr *outpipe.Pipe
	copied         chan struct{} // the attach stream ended
	copyErr        error

	launchMu  sync.Mutex
	launch    int    // launchPending ... launchUnknown
	pid       int    // the command's pid in the container, from the wrapper
	started   string // its starttime, from the wrapper
	unstarted string // why a command refused without a Kill never ran

	killed     atomic.Bool
	killEnded  atomic.Int64  // when Kill returned (unix nanoseconds), or 0
	killedAll  atomic.Bool   // Kill had to kill the whole container
	mainKilled atomic.Bool   // the killer SIGKILLed the command itself
	exited     atomic.Bool   // the engine said the exec ended
	denials0   uint64        // egress refusals before the start
	timeout    time.Duration // the command's own, which deadline and its watchdog enforce
	begun      time.Time
	deadline   *time.Timer // kills the command at its timeout
	timedOut   atomic.Bool // deadline killed it
	closeOnce  sync.Once
	waitMu     sync.Mutex
	status     *sandbox.ExitStatus
	waitErr    error
}

func newTag() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// start creates and attaches an exec for req (already validated). Its
// stdin is always attached: a terminal's carries what the caller types,
// and without a terminal it carries the wrapper's go-ahead first.
func (s *session) start(ctx context.Context, req sandbox.ExecRequest) (*process, error) {
	if req.Workdir != "" && !path.IsAbs(req.Workdir) {
		if _, err := sandbox.ResolveWorkspacePath(s.spec.Workdir, req.Workdir); err != nil {
			return nil, err
		}
	}
	tag := newTag()
	timeout := req.EffectiveTimeout(s.spec.Policy)
	// The watchdog is for a detached session's commands, which may
	// outlive agentbox; a session of a process ends with it.
	secs := "0"
	if s.spec.Detached {
		secs = strconv.FormatInt(int64((timeout+time.Second-1)/time.Second), 10)
	}
	cmd := append([]string{"/bin/sh", "-c", wrapperScript, tag, secs, killerScript}, req.Cmd...)
	if req.TTY {
		cmd = append([]string{"/bin/sh", "-c", ttyWrapperScript, tag, strconv.Itoa(int(req.Rows)), strconv.Itoa(int(req.Cols)), secs, killerScript}, req.Cmd...)
	}
	opts := client.ExecCreateOptions{
		Cmd:          cmd,
		Env:          envList(req.Env),
		WorkingDir:   s.workdirOf(req.Workdir),
		TTY:          req.TTY,
		AttachStdin:  true,
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
	p := &process{s: s, execID: created.ID, tag: tag, tty: req.TTY, conn: att.HijackedResponse, copied: make(chan struct{}), timeout: timeout, begun: time.Now()}
	if s.proxy != nil {
		p.denials0 = s.proxy.Refused()
	}
	p.stdin = newStdinWriter(&att.HijackedResponse, req.TTY)
	// The engine stops answering about a container while an exec of it
	// that ended cannot hand it the rest of its output: the attach
	// stream is read into pipes that stop taking more only while no Kill
	// is under way (see outpipe).
	p.stdout, p.stderr = outpipe.New(outputWindow), outpipe.New(outputWindow)
	outW, errW := p.stdout, p.stderr
	go func() {
		first := &firstLine{dst: outW, take: p.settle}
		var err error
		if req.TTY {
			_, err = io.Copy(first, att.Reader)
		} else {
			_, err = stdcopy.StdCopy(first, errW, att.Reader)
		}
		lineless := first.flush()
		if errors.Is(err, io.ErrClosedPipe) {
			err = nil
		}
		p.copyErr = err
		outW.End()
		errW.End()
		close(p.copied)
		if lineless {
			// After copied, so a Kill woken by this sees the stream
			// ended.
			p.settle(nil)
		}
	}()
	if timeout > 0 {
		// The command's timeout holds whoever waits for it (Exec, or
		// a caller of Start that does not count). Armed last: its Kill
		// uses every field set above.
		p.deadline = time.AfterFunc(timeout, func() {
			p.timedOut.Store(true)
			_ = p.Kill(context.Background())
		})
	}
	return p, nil
}

// Close kills the command's tree if it still runs and releases the
// attach stream.
func (p *process) Close() error {
	p.closeOnce.Do(func() {
		if p.deadline != nil {
			p.deadline.Stop()
		}
		select {
		case <-p.copied:
		default:
			_ = p.Kill(context.Background())
		}
		p.conn.Close()
		_ = p.stdout.Close()
		_ = p.stderr.Close()
	})
	return nil
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
// second exec, or stops a start that has not had its go-ahead, then waits
// for the attach stream to end. When it cannot tell which pid to kill, or
// the killer fails, it kills the whole container; an error means even
// that failed. Every step is bounded: Kill returns within about
// markerWait + helperWait + engineWait + 5 s whatever the command does.
func (p *process) Kill(ctx context.Context) error {
	p.killed.Store(true)
	// The killed command's output is finite: take it all, read or not.
	p.stdout.Drain(true)
	p.stderr.Drain(true)
	defer func() { p.killEnded.Store(time.Now().UnixNano()) }()
	if p.ended(ctx) {
		return nil
	}
	state, pid, started := p.hold()
	if state == launchPending {
		// A terminal exec: its wrapper prints the line before it
		// execs the command.
		t := time.NewTimer(markerWait)
		select {
		case <-p.stdin.ready:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		state, pid, started = p.hold()
	}
	var err error
	switch state {
	case launchRefused:
		// The wrapper reads EOF and SIGKILLs itself.
	case launchRunning:
		err = p.killTree(ctx, pid, started)
	default:
		if !p.ended(ctx) {
			p.s.c.log.Warn("docker: the pid of a command to kill is unknown, killing the session's container", "session", p.s.id)
			p.killedAll.Store(true)
			err = p.s.killAll(ctx, "the pid of a command to kill never reached agentbox")
		}
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
	return err
}

// ended reports whether the command is over: its attach stream ended and
// the engine says the exec is no longer running. The end of the stream
// alone is not enough: a command can close its output and go on.
func (p *process) ended(ctx context.Context) bool {
	select {
	case <-p.copied:
	default:
		return false
	}
	if p.exited.Load() {
		return true
	}
	// The engine notes the exit a moment after the stream ends.
	deadline := time.Now().Add(exitLag)
	for {
		insp, err := p.inspect(ctx)
		if err == nil && !insp.Running {
			p.exited.Store(true)
			return true
		}
		if err != nil || time.Now().After(deadline) {
			return false
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
			return false
		}
	}
}

// killTree runs killerScript for the command's pid, and kills the whole
// container when the killer cannot run or does not finish; an error
// means the container kill failed too.
func (p *process) killTree(ctx context.Context, pid int, started string) error {
	out, err := p.s.helperOutput(ctx, "killer", p.s.who, []string{"/bin/sh", "-c", killerScript, strconv.Itoa(pid), started})
	if strings.Contains(string(out), "main") {
		// The killer's SIGKILL ended the command itself: report it so
		// even if the engine's exit code is late or was taken from a
		// dying wrapper.
		p.mainKilled.Store(true)
	}
	if err == nil {
		return nil
	}
	// The killer could not run (the pids limit is exhausted, say, by
	// the very fork bomb being killed) or was stopped: end the whole
	// session rather than leave the tree running.
	p.s.c.log.Warn("docker: could not kill the process tree from inside, killing the session's container", "session", p.s.id, "err", err)
	p.killedAll.Store(true)
	return p.s.killAll(ctx, "its process tree could not be killed from inside ("+err.Error()+")")
}

// inspect is ExecInspect of the command's exec, bounded by engineWait.
func (p *process) inspect(ctx context.Context) (client.ExecInspectResult, error) {
	ctx, cancel := context.WithTimeout(ctx, engineWait)
	defer cancel()
	return p.s.c.api.ExecInspect(ctx, p.execID, client.ExecInspectOptions{})
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
	if err == nil {
		st, err = p.checkStarted(ctx, st)
	}
	if p.s.proxy != nil {
		for _, d := range p.s.proxy.DenialsSince(p.denials0) {
			st.Violations = append(st.Violations, sandbox.EgressViolation(d.String()))
		}
	}
	if p.s.isExpired() {
		st.TimedOut = true
		if err == nil {
			err = sandbox.Wrap("docker: session "+p.s.id, sandbox.ErrTimeout, fmt.Errorf("the session's %s limit ended the command", p.s.spec.Policy.Resources.SessionTimeout))
		}
	}
	if p.killedAll.Load() && err == nil {
		// This command's kill took the whole container: the caller
		// must learn that the session is gone, and why, from this
		// result, not from the next call. (Other commands of the
		// session that died with it hear it from describeExit.)
		err = sandbox.Wrap("docker: session "+p.s.id, sandbox.ErrClosed, errors.New("the container was killed by agentbox: "+p.s.killedWhy()))
	}
	p.status, p.waitErr = &st, err
	return st, err
}

// checkStarted turns the exit of a command that never ran into an error:
// the exit code is the engine's (126 for an exec it could not start), not
// the command's. Most often the container died and the engine has not
// noted it yet; the error then says how the container went, as the next
// call would. A terminal exec whose line never came may have run, so it
// gets an error only when its container is gone.
func (p *process) checkStarted(ctx context.Context, st sandbox.ExitStatus) (sandbox.ExitStatus, error) {
	why, unknown := p.notStarted()
	if why == "" && !unknown {
		return st, nil
	}
	if err := p.s.goneWithin(ctx, containerLag); err != nil {
		return sandbox.ExitStatus{ExitCode: -1}, err
	}
	if unknown {
		return st, nil
	}
	if n := p.s.spec.Policy.Resources.Pids; n > 0 {
		// The engine's words for it do not say so.
		why += fmt.Sprintf(" (one cause: the session's limit of %d processes and threads is full)", n)
	}
	return sandbox.ExitStatus{ExitCode: -1}, sandbox.Wrap("docker: exec in container "+shortID(p.s.containerID), nil,
		fmt.Errorf("the engine did not start the command (exit code %d): %s", st.ExitCode, why))
}

func (p *process) exitStatus(ctx context.Context) (sandbox.ExitStatus, error) {
	delay := time.Millisecond
	for {
		insp, err := p.inspect(ctx)
		if err != nil {
			return sandbox.ExitStatus{}, p.s.execError("inspect exec", err)
		}
		if !insp.Running {
			p.exited.Store(true)
			code := insp.ExitCode
			if p.mainKilled.Load() {
				code = 128 + int(unix.SIGKILL)
			}
			if p.deadline != nil {
				p.deadline.Stop()
			}
			st, err := p.s.describeExit(ctx, code, p.killed.Load())
			watchdog := st.Signal == "SIGKILL" && !st.OOMKilled && !p.killed.Load() && p.timeout > 0 && time.Since(p.begun) >= p.timeout
			if err == nil && (p.timedOut.Load() || watchdog) {
				// Killed by deadline, or by its watchdog (a SIGKILL
				// agentbox did not send, the kernel's OOM counter
				// does not explain, after the timeout).
				st.TimedOut = true
				st.Violations = append(st.Violations, sandbox.ExecTimeoutViolation(p.timeout))
			}
			return st, err
		}
		if t := p.killEnded.Load(); t != 0 && time.Since(time.Unix(0, t)) > exitAfterKill {
			// The tree, or the container, was killed long ago; an
			// exec the engine still calls running is the engine's
			// fault, and waiting on would never end.
			return sandbox.ExitStatus{ExitCode: -1}, sandbox.Wrap("docker: wait", sandbox.ErrUnavailable, fmt.Errorf("the engine still reports exec %s running %s after it was killed", shortID(p.execID), exitAfterKill))
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
		// A dead container explains the SIGKILL, and takes no probe.
		if err := s.checkAlive(ctx); err != nil {
			return st, err
		}
		oom, err := s.oomKilledSince(ctx)
		switch {
		case err == nil && oom:
			st.OOMKilled = true
			st.Violations = append(st.Violations, sandbox.OOMViolation(s.spec.Policy.Resources.MemoryBytes))
		case err != nil:
			// The container may have died meanwhile (the engine
			// notes it a moment later: then this result says so), or
			// a root command stopped the probe (it runs as root too:
			// asking the engine about the container then waits on
			// the stopped exec). Only the kernel's counter may say
			// OOM: the result names no cause rather than a guess.
			if !errors.Is(err, context.DeadlineExceeded) {
				// A probe given up on says nothing of the container,
				// and the engine may not answer while it is stopped.
				if gone := s.goneWithin(ctx, containerLag); gone != nil {
					return st, gone
				}
			}
			s.c.log.Warn("docker: a SIGKILL agentbox did not send ended a command, and the container's OOM counter could not be read", "session", s.id, "err", err)
		}
	}
	return st, nil
}
