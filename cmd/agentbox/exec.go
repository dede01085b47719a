package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/agentbox/agentbox/internal/datadir"
	"github.com/agentbox/agentbox/sandbox"
)

func init() { register(newExecCmd) }

// Exit statuses of `agentbox exec`, beside the command's own.
const (
	exitTimedOut = 124 // the command passed --timeout
	exitKilled   = 137 // killed by the OOM killer or a limit
)

func newExecCmd() *cobra.Command {
	var (
		f       execFlags
		wf      workspaceFlags
		backend string
		asJSON  bool
		tty     bool
		verbose bool
	)
	cmd := &cobra.Command{
		Use:   "exec [flags] -- CMD [ARGS...]",
		Short: "Run one command in a fresh sandbox",
		Long: `Run one command in a fresh sandbox and exit with its status.

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

  # machine-readable result
  agentbox exec --json -- sh -c 'echo out; echo err >&2; exit 3'`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return &exitError{code: exitCode, err: errors.New("exec: no command given (usage: agentbox exec [flags] -- CMD [ARGS...])")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, linked := backends[backend]; !linked && handOff != nil && slices.Contains(fullOnlyBackends, backend) {
				return handOff("exec --backend " + backend)
			}
			spec, err := f.buildSpec()
			if err != nil {
				return &exitError{code: exitCode, err: fmt.Errorf("exec: %w", err)}
			}
			if what := wf.fullOnly(spec); what != "" && handOff != nil {
				return handOff("exec " + what)
			}
			ctx, armed, release := interruptible(cmd.Context())
			defer release()
			if wf.makesFiles() {
				armed() // an interrupt must not leave what prepare makes behind
			}
			pw, err := wf.prepare(ctx, &spec, f.user != "")
			if err != nil {
				return &exitError{code: exitCode, err: fmt.Errorf("exec: %w", err)}
			}
			defer pw.cleanup()
			level := slog.LevelWarn
			if verbose {
				level = slog.LevelDebug
			}
			logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			bo := backendOptions{Logger: logger, Image: f.image, Warn: os.Stderr, FirstSession: true}
			if pw.store != nil {
				bo.Snapshots = pw.store
			}
			client, err := openBackend(backend, bo)
			if err != nil {
				return &exitError{code: exitCode, err: err}
			}
			armed() // before the session exists
			if spec.Labels == nil {
				spec.Labels = map[string]string{}
			}
			spec.Labels[ownerLabel] = ownerMark() // gc removes the session should this process die first
			code, err := runExec(ctx, client, spec, args, execIO{
				json: asJSON, tty: tty, stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr,
				saveSnapshot: wf.saveSnapshot,
			})
			if err != nil {
				return &exitError{code: exitCode, err: err}
			}
			if code != 0 {
				return &exitError{code: code}
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.SetInterspersed(false)
	fl.StringVar(&f.workspace, "workspace", "", "host `DIR` bound read-write at /workspace (default: a fresh temporary dir, removed after)")
	fl.StringArrayVar(&f.ro, "ro", nil, "bind host `HOST[:DEST]` read-only (DEST defaults to /workspace/<name>; repeatable)")
	fl.StringArrayVar(&f.rw, "rw", nil, "bind host `HOST[:DEST]` read-write (repeatable)")
	fl.StringVar(&f.network, "network", "none", "`none|HOST[,HOST...]`: no network, or only these hosts through the egress proxy (*.example.com for subdomains)")
	fl.StringVar(&f.memory, "memory", "1G", "memory limit of the whole sandbox (`SIZE` like 512M; 0 for none)")
	fl.Int64Var(&f.pids, "pids", 512, "limit on processes and threads (`N`; 0 for none)")
	fl.Float64Var(&f.cpus, "cpus", 0, "CPU limit in cores (`N`, e.g. 1.5; 0 for none)")
	fl.DurationVar(&f.timeout, "timeout", 0, "wall-clock limit; the whole process tree is killed (`DURATION` like 30s; 0 for none)")
	fl.StringVar(&f.disk, "disk", "", "workspace disk quota (`SIZE`); refused where the backend cannot enforce it")
	fl.StringArrayVar(&f.env, "env", nil, "set `KEY=VALUE` in the sandbox (repeatable; the host environment is not inherited)")
	fl.StringVar(&f.user, "user", "", "run as `UID[:GID]` inside the sandbox (default 1000:1000)")
	fl.BoolVar(&f.allowWeaker, "allow-weaker", false, "run even if the backend cannot enforce parts of the policy (each is logged)")
	fl.StringVar(&f.image, "image", "", "root filesystem image (docker backend)")
	fl.StringVar(&backend, "backend", "linux", "sandbox backend: linux (native isolation), docker, or local (confines NOTHING; development only)")
	fl.BoolVar(&asJSON, "json", false, "print one JSON object: exit_code, stdout, stderr, duration_ms, timed_out, oom_killed, output_truncated, violations")
	fl.BoolVarP(&tty, "tty", "t", false, "give the command a pseudo-terminal (interactive programs)")
	fl.BoolVarP(&verbose, "verbose", "v", false, "log what the backend does")
	fl.StringVar(&wf.manifest, "manifest", "", "workspace manifest (`FILE`, YAML or JSON) materialized before the command runs")
	fl.StringVar(&wf.snapshot, "snapshot", "", "seed the workspace from snapshot `ID` (agentbox snapshot ls)")
	fl.BoolVar(&wf.saveSnapshot, "save-snapshot", false, "save the workspace as a snapshot after the command and print its ID on stderr")
	fl.StringVar(&wf.store, "store", datadir.Snapshots(), "snapshot store `DIR`")
	return cmd
}

// execIO is where `exec` reads and writes.
type execIO struct {
	json, tty      bool
	saveSnapshot   bool
	stdin          io.Reader
	stdout, stderr io.Writer
}

// execJSON is the --json result.
type execJSON struct {
	ExitCode        int      `json:"exit_code"`
	Stdout          string   `json:"stdout"`
	Stderr          string   `json:"stderr"`
	DurationMS      int64    `json:"duration_ms"`
	TimedOut        bool     `json:"timed_out"`
	OOMKilled       bool     `json:"oom_killed"`
	OutputTruncated bool     `json:"output_truncated"`
	Violations      []string `json:"violations"`
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
	if eio.saveSnapshot {
		// Deferred after Close's defer, so it runs first: the workspace is
		// saved while the session still holds it.
		defer func() {
			id, err := sess.Snapshot(context.WithoutCancel(ctx))
			if err != nil {
				fmt.Fprintln(eio.stderr, "agentbox: saving snapshot:", err)
				return
			}
			fmt.Fprintln(eio.stderr, "agentbox: saved snapshot", id)
		}()
	}
	req := sandbox.ExecRequest{Cmd: argv, Timeout: spec.Policy.Resources.ExecTimeout}
	if eio.json {
		if !isTerminal(eio.stdin) {
			req.Stdin = eio.stdin
		}
		res, err := sandbox.Exec(ctx, sess, req)
		if err != nil {
			return 0, err
		}
		out := execJSON{
			ExitCode: res.ExitCode, Stdout: string(res.Stdout), Stderr: string(res.Stderr),
			DurationMS: res.Duration.Milliseconds(), TimedOut: res.TimedOut, OOMKilled: res.OOMKilled,
			OutputTruncated: res.OutputTruncated, Violations: res.Violations,
		}
		if out.Violations == nil {
			out.Violations = []string{}
		}
		enc := json.NewEncoder(eio.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return 0, err
		}
		return statusOf(res.ExitStatus), nil
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
		fmt.Fprintf(eio.stderr, "agentbox: command timed out after %s; its process tree was killed\n", req.Timeout)
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
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, req.Timeout)
		defer cancel()
	}
	p, err := sess.Start(runCtx, req)
	if err != nil {
		return sandbox.ExitStatus{}, err
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
	go copyOut(eio.stdout, p.Stdout())
	go copyOut(eio.stderr, p.Stderr())
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
