package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/agentbox/agentbox/sandbox"
)

// Exit statuses of `agentbox exec`, beside the command's own.
const (
	exitTimedOut = 124 // the command passed --timeout
	exitKilled   = 137 // killed by the OOM killer or a limit
)

// Exec is the exec command: one command in a fresh sandbox, or in a live
// session (--session).
func Exec(a *App) *cobra.Command {
	var (
		sf      sandboxFlags
		asJSON  bool
		tty     bool
		session string
		timeout time.Duration
		raw     bool
	)
	cmd := &cobra.Command{
		Use:   "exec [flags] -- CMD [ARGS...]",
		Short: "Run one command in a fresh sandbox, or in a live session",
		Long: `Run one command in a fresh sandbox and exit with its status; with --session,
run it in a live session made by 'agentbox session create' instead (it keeps
its files, processes and limits between commands, and a command costs about
a process start).

The command runs in /workspace as an unprivileged user (uid 1000) with no
network, a private /tmp, read-only host tools, no capabilities and a
system-call filter. The host environment is NOT inherited: pass variables
with --env. Without --workspace a fresh temporary workspace is used and
removed afterwards.

Exit status: the command's own; 124 when it passed --timeout; 137 when it
was killed (out of memory or a limit); 125 when agentbox itself failed.`,
		Example: `  # run a script against a read-only copy of the data
  agentbox exec --ro ./data --memory 512M --timeout 30s -- python3 -c 'print(open("data/x.csv").read())'

  # reach only one host, through the egress proxy
  agentbox exec --network pypi.org -- pip download requests

  # call an API whose key the sandbox never holds: it sees a placeholder in
  # $OPENAI_API_KEY, which the proxy swaps for agentbox's own value toward
  # api.openai.com only; GitHub gets a bearer token and only GETs under acme
  agentbox exec --network api.openai.com,api.github.com \
    --credential 'api.openai.com=placeholder:OPENAI_API_KEY:env:OPENAI_API_KEY' \
    --credential 'api.github.com=bearer:file:/run/secrets/gh' \
    --rule 'GET api.github.com/repos/acme/**' -- python3 agent.py

  # machine-readable result
  agentbox exec --json -- sh -c 'echo out; echo err >&2; exit 3'

  # many commands in one live sandbox
  id=$(agentbox session create --memory 512M)
  agentbox exec --session "$id" -- sh -c 'echo hello > note.txt'
  agentbox exec --session "$id" -- cat note.txt
  agentbox session rm "$id"`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return Fail(errors.New("exec: no command given (usage: agentbox exec [flags] -- CMD [ARGS...])"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			eio := execIO{json: asJSON, tty: tty, raw: raw, stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr,
				saveSnapshot: sf.workspace.saveSnapshot, timeout: timeout}
			if err := eio.check(); err != nil {
				return Fail(fmt.Errorf("exec: %w", err))
			}
			if session != "" {
				if set := sf.changed(cmd.Flags()); len(set) > 0 {
					return Failf("exec --session: --%s shape a new sandbox; a session keeps what it was created with", strings.Join(set, ", --"))
				}
				return a.execInSession(cmd.Context(), session, args, eio)
			}
			if err := a.needsFull(sf.backend); err != nil {
				return err
			}
			if err := sf.checkRemote(cmd.Flags()); err != nil {
				return err
			}
			spec, err := sf.exec.buildSpec()
			if err != nil {
				return Fail(fmt.Errorf("exec: %w", err))
			}
			spec.Policy.Resources.ExecTimeout = timeout
			ctx, release := interruptible(cmd.Context())
			defer release()
			pw, err := sf.workspace.prepare(ctx, &spec, sf.exec.user != "")
			if err != nil {
				return Fail(fmt.Errorf("exec: %w", err))
			}
			defer pw.cleanup()
			client, err := a.OpenBackend(sf.backend, sf.backendOptions(pw))
			if err != nil {
				return Fail(err)
			}
			code, err := runExec(ctx, client, spec, args, eio)
			if err != nil {
				return failed(ctx, err)
			}
			if code != 0 {
				return &ExitError{Code: code}
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.SetInterspersed(false)
	sf.register(fl)
	fl.DurationVar(&timeout, "timeout", 0, "wall-clock limit of the command; its whole process tree is killed (`DURATION` like 30s; 0 for none, or the session's own)")
	fl.StringVar(&session, "session", "", "run in the live session `ID` (agentbox session create) instead of a fresh sandbox")
	fl.BoolVar(&asJSON, "json", false, "print one JSON object: exit_code (agentbox's own status), signal, stdout, stderr, duration_ms, timed_out, oom_killed, output_truncated, violations, snapshot")
	fl.BoolVarP(&tty, "tty", "t", false, "give the command a pseudo-terminal (interactive programs; stdin must be a terminal)")
	fl.BoolVar(&raw, "raw", false, "pass the command's control characters to your terminal as they are (by default they are shown, not obeyed, unless --tty)")
	return cmd
}

// execInSession runs one command in the live session id.
func (a *App) execInSession(ctx context.Context, id string, argv []string, eio execIO) error {
	entry, err := loadSession(id)
	if err != nil {
		return Fail(err)
	}
	if err := a.needsFull(entry.State.Backend); err != nil {
		return err
	}
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	client, err := a.OpenBackend(entry.State.Backend, entry.backendOptions(BackendOptions{Logger: quiet, Warn: os.Stderr}))
	if err != nil {
		return Fail(err)
	}
	sess, err := client.Resume(ctx, entry.State)
	if errors.Is(err, sandbox.ErrGone) {
		return Failf("session %s is gone (%v); agentbox session rm %s removes what is left", id, err, id)
	}
	if err != nil {
		return Fail(fmt.Errorf("session %s: %w", id, err))
	}
	ctx, release := interruptible(ctx)
	defer release()
	code, err := runCommand(ctx, sess, argv, eio, nil)
	if err != nil {
		return failed(ctx, err)
	}
	if code != 0 {
		return &ExitError{Code: code}
	}
	return nil
}

// execIO is where `exec` reads and writes.
type execIO struct {
	json, tty      bool
	raw            bool // pass control characters to a terminal as they are
	saveSnapshot   bool
	timeout        time.Duration
	stdin          io.Reader
	stdout, stderr io.Writer
}

// check refuses a terminal for a command whose input is not one, as
// docker run -t does: the command would wait for input that can never
// end (a pipe's end of file does not reach a terminal).
func (eio execIO) check() error {
	if eio.timeout < 0 {
		return fmt.Errorf("--timeout %s: must be positive (0 means no limit)", eio.timeout)
	}
	if eio.tty && !isTerminal(eio.stdin) {
		return errors.New("--tty needs a terminal on stdin (drop --tty to pipe input to the command)")
	}
	if eio.tty && eio.json {
		return errors.New("--tty and --json do not mix: a terminal has one output stream")
	}
	return nil
}

// execJSON is the --json result. ExitCode is agentbox's own exit status,
// the one the shell sees ($?): 124 for a timeout and 137 for an OOM kill,
// with Signal saying how the process itself ended.
type execJSON struct {
	ExitCode        int      `json:"exit_code"`
	Signal          string   `json:"signal,omitempty"`
	Stdout          string   `json:"stdout"`
	Stderr          string   `json:"stderr"`
	DurationMS      int64    `json:"duration_ms"`
	TimedOut        bool     `json:"timed_out"`
	OOMKilled       bool     `json:"oom_killed"`
	OutputTruncated bool     `json:"output_truncated"`
	Violations      []string `json:"violations"`
	// Snapshot is the workspace's snapshot, with --save-snapshot.
	Snapshot string `json:"snapshot,omitempty"`
}

// runExec creates a session, runs one command, and closes the session.
// It returns the exit status agentbox should exit with.
func runExec(ctx context.Context, client sandbox.Client, spec sandbox.Spec, argv []string, eio execIO) (int, error) {
	sess, err := client.Create(ctx, spec)
	if err != nil {
		return 0, err
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if cerr := sess.Close(closeCtx); cerr != nil {
			fmt.Fprintln(eio.stderr, "agentbox: closing sandbox:", cerr)
		}
	}()
	var save func() (string, error)
	if eio.saveSnapshot {
		save = func() (string, error) { return sess.Snapshot(context.WithoutCancel(ctx)) }
	}
	return runCommand(ctx, sess, argv, eio, save)
}

// runCommand runs one command in sess and reports it as exec does; it
// returns the exit status agentbox should exit with. save, when set,
// snapshots the workspace once the command ended (also when it failed),
// before the report, so that --json carries the snapshot's id.
func runCommand(ctx context.Context, sess sandbox.Session, argv []string, eio execIO, save func() (string, error)) (int, error) {
	snapshot := func() string {
		if save == nil {
			return ""
		}
		id, err := save()
		save = nil
		if err != nil {
			fmt.Fprintln(eio.stderr, "agentbox: saving snapshot:", err)
			return ""
		}
		fmt.Fprintln(eio.stderr, "agentbox: saved snapshot", id)
		return id
	}
	defer snapshot()
	req := sandbox.ExecRequest{Cmd: argv, Timeout: eio.timeout}
	if eio.json {
		if !isTerminal(eio.stdin) {
			req.Stdin = eio.stdin
		}
		res, err := sandbox.Exec(ctx, sess, req)
		if err != nil {
			return 0, err
		}
		out := execJSON{
			ExitCode: statusOf(res.ExitStatus), Signal: res.Signal, Stdout: string(res.Stdout), Stderr: string(res.Stderr),
			DurationMS: res.Duration.Milliseconds(), TimedOut: res.TimedOut, OOMKilled: res.OOMKilled,
			OutputTruncated: res.OutputTruncated, Violations: res.Violations, Snapshot: snapshot(),
		}
		if out.Violations == nil {
			out.Violations = []string{}
		}
		enc := json.NewEncoder(eio.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return 0, err
		}
		return out.ExitCode, nil
	}
	st, err := streamExec(ctx, sess, req, eio)
	if err != nil {
		return 0, err
	}
	for _, v := range st.Violations {
		fmt.Fprintln(eio.stderr, "agentbox: policy violation:", v)
	}
	switch {
	case st.TimedOut:
		fmt.Fprintf(eio.stderr, "agentbox: command timed out after %s; its process tree was killed\n", req.EffectiveTimeout(sess.State().Spec.Policy))
	case st.OOMKilled:
		fmt.Fprintln(eio.stderr, "agentbox: command was killed: out of memory (raise --memory)")
	}
	return statusOf(st), nil
}

// statusOf maps how a command ended to agentbox's exit status.
func statusOf(st sandbox.ExitStatus) int {
	switch {
	case st.TimedOut:
		return exitTimedOut
	case st.OOMKilled:
		return exitKilled
	}
	return st.ExitCode
}

// streamExec runs req with live output, forwarding stdin (and the
// terminal, with a TTY), and kills the tree on timeout or interrupt.
func streamExec(ctx context.Context, sess sandbox.Session, req sandbox.ExecRequest, eio execIO) (sandbox.ExitStatus, error) {
	var restore func()
	if eio.tty {
		req.TTY = true
		if f, ok := eio.stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			if w, h, err := term.GetSize(int(f.Fd())); err == nil {
				req.Cols, req.Rows = uint16(w), uint16(h)
			}
			if old, err := term.MakeRaw(int(f.Fd())); err == nil {
				restore = func() { _ = term.Restore(int(f.Fd()), old) }
			}
		}
	}
	if restore != nil {
		defer restore()
	}
	runCtx := ctx
	if t := req.EffectiveTimeout(sess.State().Spec.Policy); t > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, t)
		defer cancel()
	}
	p, err := sess.Start(runCtx, req)
	if err != nil {
		return sandbox.ExitStatus{}, err
	}
	defer p.Close()
	if req.TTY {
		stop := forwardResizes(runCtx, p, eio.stdin.(*os.File))
		defer stop()
	}
	if eio.tty || !isTerminal(eio.stdin) {
		go func() {
			_, _ = io.Copy(p.Stdin(), eio.stdin)
			if !eio.tty {
				_ = p.Stdin().Close()
			}
		}()
	} else {
		_ = p.Stdin().Close()
	}
	var wg sync.WaitGroup
	copyOut := func(dst io.Writer, src io.Reader) {
		defer wg.Done()
		if src != nil {
			_, _ = io.Copy(dst, src)
		}
	}
	wg.Add(2)
	stdout, stderr := eio.stdout, eio.stderr
	if !req.TTY {
		stdout, stderr = toTerminal(stdout, eio.raw), toTerminal(stderr, eio.raw)
	}
	go copyOut(stdout, p.Stdout())
	go copyOut(stderr, p.Stderr())
	done := make(chan struct{})
	var st sandbox.ExitStatus
	var werr error
	go func() {
		defer close(done)
		wg.Wait()
		st, werr = p.Wait(context.WithoutCancel(ctx))
	}()
	select {
	case <-done:
	case <-runCtx.Done():
		_ = p.Kill(context.WithoutCancel(ctx))
		<-done
		if errors.Is(runCtx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
			st.TimedOut = true
		} else if werr == nil {
			werr = fmt.Errorf("interrupted: %w", ctx.Err())
		}
	}
	return st, werr
}

func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// forwardResizes passes the terminal's new size to p each time the
// terminal is resized (SIGWINCH), until stop is called.
func forwardResizes(ctx context.Context, p sandbox.Process, tty *os.File) (stop func()) {
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-winch:
				if w, h, err := term.GetSize(int(tty.Fd())); err == nil {
					_ = p.Resize(ctx, uint16(h), uint16(w))
				}
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(winch)
		close(done)
	}
}
