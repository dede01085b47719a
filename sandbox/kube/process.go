package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"

	"github.com/agentbox/agentbox/sandbox"
)

// pidDir is where the exec wrapper records each command's pid: a small
// emptyDir of its own (pidVolume), so that a command that fills /tmp or
// the workspace does not fail every later exec. Pods made before it had
// one keep the pids in oldPidDir, on their /tmp.
const (
	pidDir    = "/run/agentbox"
	oldPidDir = "/tmp/.agentbox"
	// pickPidDir sets d to the Pod's pid directory.
	pickPidDir = `d=` + pidDir + `; [ -d $d ] || { d=` + oldPidDir + `; mkdir -p $d 2>/dev/null; }; `
)

// killTimeout bounds the kill exec of Close.
const killTimeout = 10 * time.Second

// wrapperScript starts every command: it records its pid under the tag
// ($1) so that Kill can find the command's session (runc makes each exec a
// session leader), enters the workdir ($2) and replaces itself with env -i
// and the rest: the session's environment, then the command.
const wrapperScript = pickPidDir + `echo $$ >$d/"$1" || exit 125; cd "$2" || exit 126; shift 2; exec env -i "$@"`

// killScript kills the command tagged $1 and everything it started: its
// session (runc makes each exec a session leader, and the wrapper's pid is
// the session id) and, transitively, every child of a process already
// found, which catches a setsid'ed child whose parent still runs. Each
// process found is stopped at once, so that none forks while the scan
// runs; the scan repeats until it finds no more, then all are killed. It
// waits briefly for the wrapper to record the pid, as a kill may come
// right after a start. A daemon that double-forked out of its session is
// reparented to the Pod's init and is not found: the session's own
// timeout (activeDeadlineSeconds) ends it.
const killScript = pickPidDir + `f=$d/"$1"; i=0
while [ ! -s "$f" ] && [ $i -lt 100 ]; do sleep 0.02; i=$((i+1)); done
pid=$(cat "$f" 2>/dev/null) || exit 0
kill -STOP "$pid" 2>/dev/null
tree=" $pid "; more=1
while [ $more = 1 ]; do
	more=0
	for d in /proc/[0-9]*; do
		p=${d#/proc/}
		case "$tree" in *" $p "*) continue;; esac
		st=$(cat $d/stat 2>/dev/null) || continue
		st=${st##*) }; set -- $st
		case "$tree" in *" $2 "*|*" $4 "*) kill -STOP "$p" 2>/dev/null; tree="$tree$p "; more=1;; esac
	done
done
for p in $tree; do kill -KILL "$p" 2>/dev/null; done
rm -f "$f"; exit 0`

// execArgv is the argv the Pod runs for req: the wrapper, the tag, the
// workdir, the environment and the command.
func (s *session) execArgv(req sandbox.ExecRequest, tag string) ([]string, error) {
	if strings.Contains(req.Cmd[0], "=") {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "kube: exec: a program name with '=' (%q) would be read as a variable", req.Cmd[0])
	}
	wd := s.spec.Workdir
	if req.Workdir != "" {
		wd = req.Workdir
		if !strings.HasPrefix(wd, "/") {
			wd = s.spec.Workdir + "/" + wd
		}
	}
	env := sessionEnv(s.spec)
	if s.egress != nil {
		for k, v := range s.egress.env() {
			env[k] = v
		}
	}
	for k, v := range req.Env {
		env[k] = v
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	script := wrapperScript
	if req.TTY {
		// The terminal's size reaches the kubelet through the resize
		// stream, after the command may have started: set it first, so
		// that the command's first look at its terminal sees it.
		rows, cols := ttySize(req)
		script = fmt.Sprintf("stty rows %d cols %d 2>/dev/null; %s", rows, cols, script)
	}
	argv := []string{"/bin/sh", "-c", script, "agentbox-exec", tag, wd}
	for _, k := range keys {
		argv = append(argv, k+"="+env[k])
	}
	return append(argv, req.Cmd...), nil
}

// stream runs argv in the session's container over pods/exec (WebSocket,
// else SPDY) and returns when it ends.
func (s *session) stream(ctx context.Context, argv []string, opts remotecommand.StreamOptions) error {
	req := s.c.cs.CoreV1().RESTClient().Post().
		Namespace(s.h.Namespace).Resource("pods").Name(s.h.Pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: container, Command: argv,
			Stdin: opts.Stdin != nil, Stdout: opts.Stdout != nil, Stderr: opts.Stderr != nil, TTY: opts.Tty,
		}, scheme.ParameterCodec)
	return s.streamURL(ctx, req.URL(), opts)
}

// attach streams with the first process of the Pod's container name
// over pods/attach, until it ends.
func (s *session) attach(ctx context.Context, name string, opts remotecommand.StreamOptions) error {
	req := s.c.cs.CoreV1().RESTClient().Post().
		Namespace(s.h.Namespace).Resource("pods").Name(s.h.Pod).SubResource("attach").
		VersionedParams(&corev1.PodAttachOptions{
			Container: name,
			Stdin:     opts.Stdin != nil, Stdout: opts.Stdout != nil, Stderr: opts.Stderr != nil, TTY: opts.Tty,
		}, scheme.ParameterCodec)
	return s.streamURL(ctx, req.URL(), opts)
}

// streamURL streams over the exec or attach request at u (WebSocket, else
// SPDY).
func (s *session) streamURL(ctx context.Context, u *url.URL, opts remotecommand.StreamOptions) error {
	ws, err := remotecommand.NewWebSocketExecutor(s.c.rest, http.MethodGet, u.String())
	if err != nil {
		return fmt.Errorf("websocket executor: %w", err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(s.c.rest, http.MethodPost, u)
	if err != nil {
		return fmt.Errorf("spdy executor: %w", err)
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return fmt.Errorf("executor: %w", err)
	}
	return ex.StreamWithContext(ctx, opts)
}

// Start runs req in the Pod; see the package comment for how it is killed.
func (s *session) Start(ctx context.Context, req sandbox.ExecRequest) (sandbox.Process, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if err := s.live(); err != nil {
		return nil, err
	}
	tag, err := newID()
	if err != nil {
		return nil, sandbox.Wrap("kube: exec", nil, err)
	}
	argv, err := s.execArgv(req, tag)
	if err != nil {
		return nil, err
	}
	p := &process{s: s, tag: tag, tty: req.TTY, done: make(chan struct{}), sizes: make(chan remotecommand.TerminalSize, 4)}
	stdinR, stdinW := io.Pipe()
	outR, outW := io.Pipe()
	p.stdin, p.stdout = stdinW, outR
	opts := remotecommand.StreamOptions{Stdin: stdinR, Stdout: outW, Tty: req.TTY}
	var errW *io.PipeWriter
	if req.TTY {
		rows, cols := ttySize(req)
		p.sizes <- remotecommand.TerminalSize{Height: rows, Width: cols}
		opts.TerminalSizeQueue = p
		p.stderr = strings.NewReader("")
	} else {
		var errR *io.PipeReader
		errR, errW = io.Pipe()
		p.stderr, p.errR = errR, errR
		opts.Stderr = errW
	}
	if req.Stdin != nil {
		go func() {
			_, err := io.Copy(stdinW, req.Stdin)
			stdinW.CloseWithError(err)
		}()
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p.cancel = cancel
	var refused uint64 // the proxy's refusals before the command
	if s.egress != nil {
		refused = s.egress.proxy.Refused()
	}
	go func() {
		defer close(p.done)
		err := s.stream(sctx, argv, opts)
		p.status, p.err = exitStatus(err)
		if s.egress != nil {
			for _, d := range s.egress.proxy.DenialsSince(refused) {
				p.status.Violations = append(p.status.Violations, sandbox.EgressViolation(d.String()))
			}
		}
		outW.Close()
		if errW != nil {
			errW.Close()
		}
		stdinR.Close()
	}()
	return p, nil
}

// exitStatus reads how the command ended from the stream's error.
func exitStatus(err error) (sandbox.ExitStatus, error) {
	if err == nil {
		return sandbox.ExitStatus{}, nil
	}
	var ee utilexec.ExitError
	if errors.As(err, &ee) {
		st := sandbox.ExitStatus{ExitCode: ee.ExitStatus()}
		if st.ExitCode > 128 && st.ExitCode < 128+65 {
			if name := signalName(syscall.Signal(st.ExitCode - 128)); name != "" {
				st.Signal = name
			}
		}
		return st, nil
	}
	return sandbox.ExitStatus{ExitCode: -1}, sandbox.Wrap("kube: exec", sandbox.ErrUnavailable, err)
}

// signalName names the signals a killed command usually gets.
func signalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGSEGV:
		return "SIGSEGV"
	case syscall.SIGABRT:
		return "SIGABRT"
	case syscall.SIGPIPE:
		return "SIGPIPE"
	}
	return ""
}

// process is one command running over a pods/exec stream.
type process struct {
	s      *session
	tag    string
	tty    bool
	stdin  *io.PipeWriter
	stdout *io.PipeReader
	stderr io.Reader
	errR   *io.PipeReader // stderr without a terminal
	sizes  chan remotecommand.TerminalSize
	cancel context.CancelFunc

	done   chan struct{}
	status sandbox.ExitStatus
	err    error

	mu     sync.Mutex
	killed bool
	closed bool
}

// Stdin is the command's standard input. With a terminal, Close sends
// the terminal's end-of-file character instead of closing the stream:
// the runtime hangs up a terminal whose input closes, and the output
// still on its way would be lost.
func (p *process) Stdin() io.WriteCloser {
	if p.tty {
		return ttyStdin{p.stdin}
	}
	return p.stdin
}

// ttyStdin is a terminal's input, which Close ends with ^D.
type ttyStdin struct{ w *io.PipeWriter }

func (t ttyStdin) Write(b []byte) (int, error) { return t.w.Write(b) }
func (t ttyStdin) Close() error {
	go t.w.Write([]byte{4}) // read when the terminal's reader next reads
	return nil
}
func (p *process) Stdout() io.Reader { return p.stdout }
func (p *process) Stderr() io.Reader { return p.stderr }

// Next gives the executor the terminal's sizes (remotecommand's
// TerminalSizeQueue); nil ends the queue.
func (p *process) Next() *remotecommand.TerminalSize {
	select {
	case sz := <-p.sizes:
		return &sz
	case <-p.done:
		return nil
	}
}

// Resize queues a new terminal size for a TTY process.
func (p *process) Resize(ctx context.Context, rows, cols uint16) error {
	if !p.tty {
		return sandbox.Errorf(sandbox.ErrInvalid, "kube: resize of a process without a terminal")
	}
	select {
	case p.sizes <- remotecommand.TerminalSize{Height: rows, Width: cols}:
		return nil
	case <-p.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Kill ends the command's whole session inside the Pod, with a second
// exec; the stream then ends as the command does.
func (p *process) Kill(ctx context.Context) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	p.mu.Lock()
	p.killed = true
	p.mu.Unlock()
	err := p.s.stream(ctx, []string{"/bin/sh", "-c", killScript, "agentbox-kill", p.tag}, remotecommand.StreamOptions{Stdout: io.Discard, Stderr: io.Discard})
	if err != nil {
		if _, werr := exitStatus(err); werr != nil {
			return sandbox.Wrap("kube: kill", sandbox.ErrUnavailable, err)
		}
	}
	return nil
}

// Wait waits for the stream to end and reports the exit status.
func (p *process) Wait(ctx context.Context) (sandbox.ExitStatus, error) {
	select {
	case <-p.done:
		return p.status, p.err
	case <-ctx.Done():
		return sandbox.ExitStatus{}, ctx.Err()
	}
}

// Close kills the command if it still runs and ends the stream.
func (p *process) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	// Unread output must not hold the stream: writes fail from now on.
	p.stdout.CloseWithError(sandbox.ErrClosed)
	if p.errR != nil {
		p.errR.CloseWithError(sandbox.ErrClosed)
	}
	select {
	case <-p.done:
	default:
		ctx, cancel := context.WithTimeout(context.Background(), killTimeout)
		_ = p.Kill(ctx)
		cancel()
		select {
		case <-p.done:
		case <-time.After(killTimeout):
			p.cancel()
			<-p.done
		}
	}
	p.cancel()
	_ = p.stdin.Close()
	return nil
}

// ttySize is the terminal size req asks for, 24x80 by default.
func ttySize(req sandbox.ExecRequest) (rows, cols uint16) {
	if req.Rows == 0 || req.Cols == 0 {
		return 24, 80
	}
	return req.Rows, req.Cols
}
