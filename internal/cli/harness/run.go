package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/agent"
	"github.com/agentbox/agentbox/artifact"
	"github.com/agentbox/agentbox/internal/cli"
	"github.com/agentbox/agentbox/internal/toolcache"
	"github.com/agentbox/agentbox/manifest"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/snapshot"
	"github.com/agentbox/agentbox/trace"
)

// runFlags are the flags of `agentbox run`.
type runFlags struct {
	agentFile    string
	backend      string
	kube         cli.KubeOptions
	provider     string
	modelName    string
	baseURL      string
	plan         string
	snapshot     string
	saveSnapshot bool
	store        string
	workspace    string
	tracePath    string
	promoteTo    string
	rules        string
	allowWeaker  bool
	caches       []string
	asJSON       bool
	maxTurns     int
	resume       string
	saveState    string
	saveRun      string
	approvalWait bool
	quiet        bool
	verbose      bool
}

// Run is the run command.
func Run(app *cli.App) *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run --agent agent.yaml [flags] \"task\"",
		Short: "Run an AI agent whose commands and file edits are confined to a sandbox",
		Long: `Run an agent (an agent.yaml: instructions, workspace manifest, capabilities,
model, policy) on a task. Every tool call the model makes runs in a
sandbox session; progress is printed on stderr, one line per step, with
the model's text as it streams (openai-responses and openai-chat), and
the final answer on stdout.

After a successful run, when the agent file has artifacts (rules + to) or
--promote-to is given, the outputs are checked against the rules and
promoted out of the sandbox with a provenance record, before the session
is closed.

The model comes from the agent file's model section; --provider, --model,
--base-url and --plan override it. openai-responses and openai-chat read
OPENAI_API_KEY and OPENAI_BASE_URL (any compatible server: Ollama, vLLM,
llama.cpp); scripted plays a recorded plan offline.

Every run writes a JSONL trace (--trace, default under the user cache
directory); show it with 'agentbox trace show FILE'. When
OTEL_EXPORTER_OTLP_ENDPOINT is set, spans are also exported over OTLP/HTTP.

Exit status: 0 when the agent answered (and promotion passed), 130 when
Ctrl-C or SIGTERM ended it, 125 when the run or the promotion failed.`,
		Example: `  # offline, with the scripted model, in the native sandbox
  agentbox run --agent examples/reconcile/agent.yaml "Reconcile March"

  # the same agent against a local OpenAI-compatible server
  agentbox run --agent examples/reconcile/agent.yaml --provider openai-chat \
      --base-url http://localhost:11434/v1 --model qwen2.5 "Reconcile March"`,
		Args: func(cmd *cobra.Command, args []string) error {
			if f.resume != "" && len(args) == 0 {
				return nil // a saved run carries its task
			}
			if len(args) != 1 || strings.TrimSpace(args[0]) == "" {
				return cli.Fail(errors.New(`run: give the task as one argument (usage: agentbox run --agent agent.yaml "task")`))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			task := ""
			if len(args) == 1 {
				task = args[0]
			}
			if err := runAgent(cmd.Context(), app, f, task, cmd.OutOrStdout(), cmd.ErrOrStderr()); err != nil {
				var ee *cli.ExitError
				if errors.As(err, &ee) {
					return err
				}
				return cli.Fail(err)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.agentFile, "agent", "", "agent `FILE` (YAML)")
	fl.StringVar(&f.backend, "backend", "linux", "sandbox backend: linux (native isolation), docker, kube (a Pod on a Kubernetes cluster; see --kubeconfig), or local (confines NOTHING; development only)")
	cli.RegisterKubeFlags(fl, &f.kube)
	fl.StringVar(&f.provider, "provider", "", "model provider: "+strings.Join(agent.Providers, "|")+" (overrides the agent file)")
	fl.StringVar(&f.modelName, "model", "", "model `NAME` (overrides the agent file)")
	fl.StringVar(&f.baseURL, "base-url", "", "model server base `URL` (default OPENAI_BASE_URL, then api.openai.com)")
	fl.StringVar(&f.plan, "plan", "", "scripted model plan `FILE` (overrides the agent file)")
	fl.StringVar(&f.snapshot, "snapshot", "", "seed the workspace from snapshot `ID`")
	fl.BoolVar(&f.saveSnapshot, "save-snapshot", false, "snapshot the workspace when the run ends and print its ID")
	fl.StringVar(&f.store, "store", snapshot.DefaultDir(), "snapshot store `DIR`")
	fl.StringVar(&f.workspace, "workspace", "", "host `DIR` used as the workspace and kept (default: a fresh temporary dir, removed after)")
	fl.StringVar(&f.tracePath, "trace", "", "write the JSONL trace to `FILE` (default: under the user cache dir)")
	fl.StringVar(&f.promoteTo, "promote-to", "", "promote the checked outputs to `DIR` (overrides artifacts.to)")
	fl.StringVar(&f.rules, "rules", "", "artifact rules `FILE` (overrides artifacts.rules)")
	fl.BoolVar(&f.allowWeaker, "allow-weaker", false, "run even if the backend cannot enforce parts of the policy (each is logged)")
	fl.StringSliceVar(&f.caches, "cache", nil, toolcache.FlagUsage())
	fl.BoolVar(&f.asJSON, "json", false, "print the run's result as JSON on stdout instead of the final answer")
	fl.IntVar(&f.maxTurns, "max-turns", 0, "override the agent's turn limit")
	fl.StringVar(&f.resume, "resume", "", "continue the run saved in `FILE` by --save-run (its conversation, pending calls and session; the task may then be left out; a call that had begun when the run stopped is not run again but answered as interrupted), or resume the session saved by --save-state")
	fl.StringVar(&f.saveRun, "save-run", "", "keep the run's state in `FILE` as it goes (conversation, turns, pending calls, session), so --resume FILE continues it in a new process after a crash, Ctrl-C or --approval-wait (keep the workspace with --workspace or --save-snapshot); a state that cannot be written stops the run, before the next call runs")
	fl.BoolVar(&f.approvalWait, "approval-wait", false, "when a call needs approval and there is no terminal to ask, stop the run with the call pending instead of denying it (needs --save-run; --resume asks again)")
	fl.StringVar(&f.saveState, "save-state", "", "write the session's state to `FILE` after the run, to --resume it later (keep the workspace with --workspace or --save-snapshot)")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "print only the final answer, errors, and what --save-snapshot and --save-state ask for: no progress, promotion table or trace path")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "log what the backend does")
	return cmd
}

// runJSON is what --json prints: the Result plus where things went.
type runJSON struct {
	*agent.Result
	Error     string               `json:"error,omitempty"`
	Trace     string               `json:"trace"`
	Promoted  *artifact.Record     `json:"promoted,omitempty"`
	PromoteTo string               `json:"promote_to,omitempty"`
	Rejected  []artifact.Violation `json:"rejected,omitempty"`
}

func runAgent(ctx context.Context, app *cli.App, f runFlags, task string, stdout, stderr io.Writer) error {
	if f.agentFile == "" {
		return errors.New("run: --agent FILE is required")
	}
	file, err := agent.LoadFile(f.agentFile)
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	mc := file.Model
	for dst, src := range map[*string]string{&mc.Provider: f.provider, &mc.Name: f.modelName, &mc.BaseURL: f.baseURL, &mc.Plan: f.plan} {
		if src != "" {
			*dst = src
		}
	}
	m, err := openModel(mc)
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	a := file.Agent
	a.Model = m
	if f.modelName != "" {
		a.Settings.Model = f.modelName
	}

	rulesPath, promoteTo := file.Artifacts.Rules, file.Artifacts.To
	if f.rules != "" {
		rulesPath = f.rules
	}
	if f.promoteTo != "" {
		promoteTo = f.promoteTo
	}
	var rules *artifact.Rules
	if promoteTo != "" {
		if rulesPath == "" {
			return errors.New("run: --promote-to needs artifact rules (artifacts.rules in the agent file, or --rules)")
		}
		if rules, err = artifact.LoadRules(rulesPath); err != nil {
			return fmt.Errorf("run: %w", err)
		}
		if promoteTo, err = filepath.Abs(promoteTo); err != nil {
			return fmt.Errorf("run: promote-to: %w", err)
		}
	}

	spec := sandbox.Spec{Policy: file.Policy, AllowWeaker: f.allowWeaker, Labels: map[string]string{"agent": a.Name}}
	if err := toolcache.Apply(&spec, toolcache.Dir(), append(file.Caches, f.caches...)); err != nil {
		return fmt.Errorf("run: --cache: %w", err)
	}
	if f.workspace != "" {
		ws, err := filepath.Abs(f.workspace)
		if err != nil {
			return fmt.Errorf("run: workspace: %w", err)
		}
		if err := os.MkdirAll(ws, 0o755); err != nil {
			return fmt.Errorf("run: create workspace %s: %w", ws, err)
		}
		spec.Workspace = ws
	}

	level := slog.LevelWarn
	if f.verbose {
		level = slog.LevelDebug
	}
	bo := cli.BackendOptions{Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})), Warn: stderr, Kube: f.kube}
	if f.approvalWait && f.saveRun == "" {
		return errors.New("run: --approval-wait stops the run with a call pending; give --save-run FILE to continue it later")
	}
	var resume *sandbox.State
	var resumeRun *agent.RunState
	if f.resume != "" {
		data, err := os.ReadFile(f.resume)
		if err != nil {
			return fmt.Errorf("run: read saved state: %w", err)
		}
		rs, isRun, err := agent.UnmarshalRunState(data)
		switch {
		case err != nil:
			return fmt.Errorf("run: %s: %w", f.resume, err)
		case isRun:
			resumeRun = rs
			st := rs.Session
			resume = &st
		default:
			st, err := sandbox.UnmarshalState(data)
			if err != nil {
				return fmt.Errorf("run: %s: %w", f.resume, err)
			}
			resume = &st
		}
	}
	if resumeRun == nil && task == "" {
		return errors.New(`run: give the task as one argument (usage: agentbox run --agent agent.yaml "task"); only a run saved with --save-run carries its own`)
	}
	// The store opens whenever anything names a snapshot: a session seeded
	// from one, or rebuilt from the one its saved state names.
	if f.snapshot != "" || f.saveSnapshot || (resume != nil && (resume.Snapshot != "" || resume.Spec.Snapshot != "")) {
		store, err := snapshot.Open(f.store, snapshot.Options{})
		if err != nil {
			return fmt.Errorf("run: %w", err)
		}
		bo.Snapshots = store
	}
	client, err := app.OpenBackend(f.backend, bo)
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}

	tracePath, tw, err := openTrace(ctx, f.tracePath, a.Name)
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	defer func() {
		if err := tw.Close(); err != nil {
			fmt.Fprintf(stderr, "agentbox: %v\n", err)
		}
	}()
	// The model's key never belongs in the record; nor does what the agent
	// file names as secret.
	tw.Redactor().AddSecret(os.Getenv("OPENAI_API_KEY"))
	for _, p := range file.Redact {
		if err := tw.Redactor().AddPattern(p); err != nil {
			return fmt.Errorf("run: %w", err)
		}
	}

	parent := ctx
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	out := runJSON{Trace: tracePath, PromoteTo: promoteTo}
	cfg := agent.RunConfig{
		Sandbox: agent.SandboxConfig{
			Client: client, State: resume, Snapshot: f.snapshot, Spec: spec, SaveSnapshot: f.saveSnapshot,
			ManifestBase: file.ManifestBase, TrustedManifest: true,
		},
		Trace:     tw,
		Approvals: file.Approvals,
		Approver:  terminalApprover(stderr, f.approvalWait),
		MaxTurns:  f.maxTurns,
		Resume:    resumeRun,
	}
	var saveErr error
	// runCtx is the run's: a state that cannot be saved stops it (not
	// ctx, which says whether a signal did).
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	if f.saveRun != "" {
		cfg.Checkpoint = func(st *agent.RunState) {
			if err := writeRunState(f.saveRun, st); err != nil && saveErr == nil {
				// Going on would run calls that a resume from the last
				// state saved runs again: the run stops here, before the
				// call whose start this state marks.
				saveErr = err
				fmt.Fprintf(stderr, "agentbox: %v; the run stops\n", err)
				stopRun()
			}
		}
	}
	if !f.quiet {
		cfg.OnEvent = progressPrinter(stderr)
	}
	if rules != nil {
		cfg.BeforeClose = func(ctx context.Context, sess sandbox.Session, res *agent.Result) error {
			var src artifact.Source = artifact.NewSessionSource(sess)
			if st := sess.State(); st.Backend == "local" && st.Workspace != "" {
				// Unconfined commands see the host, not /workspace, so the
				// session's sandbox paths mean nothing to them: read the
				// host workspace directly (descriptor-based, no links).
				ds, err := artifact.NewDirSource(st.Workspace)
				if err != nil {
					return fmt.Errorf("promote outputs from %s: %w", st.Workspace, err)
				}
				src = ds
			}
			// Validate commands run in a fresh session like the agent's,
			// on the staged copies (artifact.PromoteOptions.NewSession).
			rec, err := artifact.Promote(ctx, src, rules, promoteTo, artifact.PromoteOptions{
				RunID: res.RunID, TraceID: res.TraceID, NewSession: artifact.FreshSessionLike(client, sess),
				Run: runRecord(a, task, sess.State().Spec.Policy, res),
			})
			_ = tw.Emit(promotionEvent(promoteTo, rec, err))
			if err != nil {
				var re *artifact.RejectedError
				if errors.As(err, &re) {
					out.Rejected = re.Violations
				}
				return fmt.Errorf("promote outputs to %s: %w", promoteTo, err)
			}
			out.Promoted = rec
			return nil
		}
	}

	res, runErr := (&agent.Runner{}).Run(runCtx, a, task, cfg)
	runErr = errors.Join(runErr, saveErr)
	if f.saveRun != "" && runErr != nil && saveErr == nil {
		fmt.Fprintf(stderr, "run saved: continue it with agentbox run --agent %s --resume %s\n", f.agentFile, f.saveRun)
	}
	out.Result = res
	if runErr != nil {
		out.Error = runErr.Error()
	}
	if f.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return fmt.Errorf("run: print result: %w", err)
		}
	} else if res != nil && res.FinalOutput != "" {
		fmt.Fprintln(stdout, strings.TrimRight(res.FinalOutput, "\n"))
	}
	if out.Promoted != nil && !f.asJSON && !f.quiet {
		printPromoted(stderr, out.Promoted, promoteTo)
		for _, fr := range out.Promoted.Files {
			if strings.HasSuffix(fr.Path, "report.md") {
				fmt.Fprintf(stderr, "report: %s\n", filepath.Join(promoteTo, filepath.FromSlash(fr.Path)))
			}
		}
	}
	if res != nil && res.Snapshot != "" {
		fmt.Fprintf(stderr, "snapshot: %s\n", res.Snapshot)
	}
	if f.saveState != "" && res != nil && res.State.ID != "" {
		data, err := sandbox.MarshalState(res.State)
		if err == nil {
			err = os.WriteFile(f.saveState, append(data, '\n'), 0o600)
		}
		if err != nil {
			runErr = errors.Join(runErr, fmt.Errorf("save session state to %s: %w", f.saveState, err))
		} else {
			fmt.Fprintf(stderr, "state: %s\n", f.saveState)
		}
	}
	if !f.quiet || runErr != nil {
		fmt.Fprintf(stderr, "trace: %s\n", tracePath)
	}
	if runErr != nil {
		for _, v := range out.Rejected {
			fmt.Fprintf(stderr, "  rejected: %s\n", v)
		}
		if ctx.Err() != nil && parent.Err() == nil {
			// Ended by Ctrl-C or SIGTERM: exit as a shell reports SIGINT.
			return &cli.ExitError{Code: cli.ExitInterrupted, Err: fmt.Errorf("run: interrupted: %w", runErr)}
		}
		return fmt.Errorf("run: %w", runErr)
	}
	return nil
}

// openTrace creates the trace file (by default under the user cache
// directory) and turns on OTLP export when the environment asks for it.
func openTrace(ctx context.Context, path, agentName string) (string, *trace.Writer, error) {
	if path == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			dir = os.TempDir()
		}
		dir = filepath.Join(dir, "agentbox", "traces")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", nil, fmt.Errorf("create trace directory %s: %w", dir, err)
		}
		name := strings.Map(func(r rune) rune {
			if r == '/' || r == os.PathSeparator || r == ' ' {
				return '_'
			}
			return r
		}, agentName)
		path = filepath.Join(dir, time.Now().UTC().Format("20060102T150405.000")+"-"+name+".jsonl")
	}
	tw, err := trace.Create(path)
	if err != nil {
		return "", nil, err
	}
	if cfg, ok := trace.OTLPFromEnv(); ok {
		if err := tw.ExportOTLP(ctx, cfg); err != nil {
			tw.Close()
			return "", nil, err
		}
	}
	return path, tw, nil
}

// promotionEvent records a promotion in the trace: each file's hash, or
// the rules it broke, or why it failed.
func promotionEvent(dest string, rec *artifact.Record, err error) trace.Event {
	e := trace.Event{Type: trace.Promotion, Dest: dest}
	if rec != nil {
		for _, f := range rec.Files {
			e.Files = append(e.Files, trace.PromotedFile{Path: f.Path, SHA256: f.SHA256, Size: f.Size})
		}
	}
	var re *artifact.RejectedError
	switch {
	case errors.As(err, &re):
		for _, v := range re.Violations {
			e.Rejected = append(e.Rejected, v.String())
		}
	case err != nil:
		e.Err = err.Error()
	}
	return e
}

// runRecord is what the provenance record says about the run that made
// the promoted files.
func runRecord(a *agent.SandboxAgent, task string, policy sandbox.Policy, res *agent.Result) *artifact.RunRecord {
	provider, name, _ := strings.Cut(a.Model.Name(), ":")
	if a.Settings.Model != "" {
		name = a.Settings.Model
	}
	inputs := res.Inputs
	if inputs == nil {
		inputs = []manifest.Input{}
	}
	return &artifact.RunRecord{Agent: a.Name, Provider: provider, Model: name, ModelsAnswered: res.Models,
		Task: task, Policy: policy, Inputs: inputs}
}

// writeRunState replaces path with st, atomically: a crash mid-write
// leaves the previous state.
func writeRunState(path string, st *agent.RunState) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("save run state: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("save run state to %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("save run state to %s: %w", path, err)
	}
	return nil
}
