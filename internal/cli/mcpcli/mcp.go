// Package mcpcli is the mcp command: agentbox as an MCP server (package
// mcp) on stdio. It links the MCP Go SDK, which only agentbox-full pays
// for at start-up (a server starts once per client, not per command).
package mcpcli

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/artifact"
	"github.com/agentbox/agentbox/internal/cli"
	"github.com/agentbox/agentbox/internal/datadir"
	"github.com/agentbox/agentbox/mcp"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/snapshot"
)

// Register links the mcp command into a.
func Register(a *cli.App) { a.Add(Command) }

type flags struct {
	ceiling   cli.CeilingFlags
	policy    string
	keep      bool
	traceDir  string
	http      string
	tokenFile string
	idle      time.Duration
	store     string
	rules     string
	promoteTo string
}

// tokenEnv holds the bearer token of --http when no --token-file names one.
const tokenEnv = "AGENTBOX_MCP_TOKEN"

// Command is the mcp command.
func Command(app *cli.App) *cobra.Command {
	var f flags
	cmd := &cobra.Command{
		Use:   "mcp [flags]",
		Short: "Serve sandboxes to an MCP client (Claude Desktop, an IDE, any agent) on stdio or HTTP",
		Long: `Serve agentbox's sandboxes as Model Context Protocol tools, on stdin and
stdout, for the MCP client that starts this command: sandbox_create,
sandbox_list, sandbox_close, exec, write_stdin, read_file, write_file,
list_dir, apply_patch, snapshot_save, snapshot_restore, and promote (with
--rules and --promote-to); and as resources,
each sandbox's files (agentbox://session/ID/PATH) and trace
(agentbox://trace/ID). A client that only calls exec gets a sandbox made
for it on its first call.

The operator decides, the model does not: --policy FILE (its policy key, as
in an agent file) or the flags fix the ceiling of every sandbox (network,
memory, processes, CPU, per-command time, host directories offered
read-only with --ro); a tool call may ask for less, never more. Flags given
on the command line override the file's values. The file may also name
presets (policies within the ceiling a client picks by name; "default"
applies when it names none) and approval rules (a matching call runs only
once the client's user approves it; a client that cannot ask its user gets
a refusal):

  policy:    {network: [pypi.org, files.pythonhosted.org], memory: 2G, timeout: 5m}
  presets:   {default: {network: none, memory: 512M}, python: {network: [pypi.org, files.pythonhosted.org]}}
  approvals: [{tool: exec, match: 'rm\s+-rf|git push'}]

Every call that acts on a sandbox is recorded in that sandbox's JSONL trace
(--trace-dir; 'agentbox trace show FILE'). When the client disconnects, its
sandboxes are closed; with --keep they stay, detached, for 'agentbox
session ls', 'agentbox exec --session ID' and 'agentbox session rm' (which also removes the directory the model's
manifest was written into; an allow-list network ends with this process:
its egress proxy runs here).
Logs go to stderr; stdout carries only the protocol.

With --http ADDR the same tools are served over streamable HTTP at
http://ADDR/mcp to clients holding the bearer token ($AGENTBOX_MCP_TOKEN
or --token-file); each MCP session is a client, whose sandboxes are closed
when it ends the session or stays idle past --idle-timeout.`,
		Example: `  # what an MCP client's configuration runs (see README: "MCP")
  agentbox mcp --network pypi.org,files.pythonhosted.org --memory 2G --timeout 5m

  # with a policy file and a read-only input directory
  agentbox mcp --policy mcp-policy.yaml --ro /srv/statements:data

  # for clients on the network, with a bearer token
  AGENTBOX_MCP_TOKEN=$(cat token) agentbox mcp --http 127.0.0.1:8765`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := serve(cmd, app, &f); err != nil {
				return cli.Fail(fmt.Errorf("mcp: %w", err))
			}
			return nil
		},
	}
	fl := cmd.Flags()
	f.ceiling.Register(fl)
	fl.StringVar(&f.policy, "policy", "", "the operator's policy `FILE` (YAML: policy: {network, memory, pids, cpus, timeout, ...}); flags override it")
	fl.BoolVar(&f.keep, "keep", false, "keep a client's sandboxes, detached, when it disconnects (agentbox session ls / rm)")
	fl.StringVar(&f.http, "http", "", "serve streamable HTTP on `ADDR` (host:port; path /mcp) instead of stdio; every request needs the bearer token")
	fl.StringVar(&f.tokenFile, "token-file", "", "read --http's bearer token from `FILE` (default $"+tokenEnv+")")
	fl.DurationVar(&f.idle, "idle-timeout", 30*time.Minute, "with --http, close a client's session and sandboxes after this long without a request")
	fl.StringVar(&f.store, "store", datadir.Snapshots(), "snapshot store `DIR` of snapshot_save and snapshot_restore")
	fl.StringVar(&f.rules, "rules", "", "artifact rules `FILE` of the promote tool (with --promote-to; without both, the tool is not offered)")
	fl.StringVar(&f.promoteTo, "promote-to", "", "host `DIR` under which each promotion gets a directory of its own")
	fl.StringVar(&f.traceDir, "trace-dir", filepath.Join(datadir.Dir(), "traces", "mcp"), "write each sandbox's JSONL trace in `DIR` (empty: no trace)")
	return cmd
}

func serve(cmd *cobra.Command, app *cli.App, f *flags) error {
	var base *sandbox.Policy
	conf := &mcp.Config{}
	if f.policy != "" {
		c, err := mcp.LoadConfig(f.policy)
		if err != nil {
			return err
		}
		conf, base = c, &c.Ceiling
	}
	ceiling, mounts, allowWeaker, err := f.ceiling.Ceiling(cmd.Flags(), base)
	if err != nil {
		return err
	}
	store, err := snapshot.Open(f.store, snapshot.Options{})
	if err != nil {
		return fmt.Errorf("--store %s: %w", f.store, err)
	}
	client, err := app.OpenBackend(f.ceiling.Backend, f.ceiling.BackendOptions(store))
	if err != nil {
		return err
	}
	level := slog.LevelWarn
	if f.ceiling.Verbose {
		level = slog.LevelDebug
	}
	opts := mcp.Options{
		Client:      client,
		Ceiling:     ceiling,
		Mounts:      mounts,
		AllowWeaker: allowWeaker,
		Presets:     conf.Presets,
		Approvals:   conf.Approvals,
		Keep:        f.keep,
		TraceDir:    f.traceDir,
		Logger:      slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})),
	}
	if f.keep {
		opts.OnKeep = cli.KeepSession
	}
	if (f.rules == "") != (f.promoteTo == "") {
		return fmt.Errorf("--rules and --promote-to go together: the rules say what may leave, --promote-to where")
	}
	if f.rules != "" {
		rules, err := artifact.LoadRules(f.rules)
		if err != nil {
			return err
		}
		to, err := filepath.Abs(f.promoteTo)
		if err != nil {
			return fmt.Errorf("--promote-to: %w", err)
		}
		opts.Promotion = &mcp.Promotion{Rules: rules, To: to}
	}
	srv, err := mcp.New(opts)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	if f.http == "" {
		return srv.Run(ctx, &sdk.StdioTransport{})
	}
	token, err := readToken(f.tokenFile)
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", f.http)
	if err != nil {
		return fmt.Errorf("--http %s: %w", f.http, err)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "agentbox mcp: serving MCP on http://%s/mcp\n", l.Addr())
	return srv.ServeHTTP(ctx, l, mcp.HTTPOptions{Token: token, IdleTimeout: f.idle})
}

// readToken is the bearer token of --http: the first line of file, else
// $AGENTBOX_MCP_TOKEN.
func readToken(file string) (string, error) {
	if file == "" {
		if t := os.Getenv(tokenEnv); t != "" {
			return t, nil
		}
		return "", fmt.Errorf("--http needs a bearer token: set $%s or --token-file FILE (e.g. head -c 24 /dev/urandom | base64 > FILE)", tokenEnv)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	t, _, _ := strings.Cut(string(data), "\n")
	return strings.TrimSpace(t), nil
}
