// Package mcpcli is the mcp command: agentbox as an MCP server (package
// mcp) on stdio. It links the MCP Go SDK, which only agentbox-full pays
// for at start-up (a server starts once per client, not per command).
package mcpcli

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/cli"
	"github.com/agentbox/agentbox/internal/datadir"
	"github.com/agentbox/agentbox/mcp"
	"github.com/agentbox/agentbox/sandbox"
)

// Register links the mcp command into a.
func Register(a *cli.App) { a.Add(Command) }

type flags struct {
	ceiling  cli.CeilingFlags
	policy   string
	keep     bool
	traceDir string
}

// Command is the mcp command.
func Command(app *cli.App) *cobra.Command {
	var f flags
	cmd := &cobra.Command{
		Use:   "mcp [flags]",
		Short: "Serve sandboxes to an MCP client (Claude Desktop, an IDE, any agent) on stdio",
		Long: `Serve agentbox's sandboxes as Model Context Protocol tools, on stdin and
stdout, for the MCP client that starts this command: sandbox_create,
sandbox_list, sandbox_close, exec, write_stdin, read_file, write_file,
list_dir and apply_patch. A client that only calls exec gets a sandbox made
for it on its first call.

The operator decides, the model does not: --policy FILE (its policy key, as
in an agent file) or the flags fix the ceiling of every sandbox (network,
memory, processes, CPU, per-command time, host directories offered
read-only with --ro); a tool call may ask for less, never more. Flags given
on the command line override the file's values.

Every call that acts on a sandbox is recorded in that sandbox's JSONL trace
(--trace-dir; 'agentbox trace show FILE'). When the client disconnects, its
sandboxes are closed; with --keep they stay, detached, for 'agentbox
session ls', 'agentbox exec --session ID' and 'agentbox session rm' (an
allow-list network ends with this process: its egress proxy runs here).
Logs go to stderr; stdout carries only the protocol.`,
		Example: `  # what an MCP client's configuration runs (see README: "MCP")
  agentbox mcp --network pypi.org,files.pythonhosted.org --memory 2G --timeout 5m

  # with a policy file and a read-only input directory
  agentbox mcp --policy mcp-policy.yaml --ro /srv/statements:data`,
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
	fl.StringVar(&f.traceDir, "trace-dir", filepath.Join(datadir.Dir(), "traces", "mcp"), "write each sandbox's JSONL trace in `DIR` (empty: no trace)")
	return cmd
}

func serve(cmd *cobra.Command, app *cli.App, f *flags) error {
	var base *sandbox.Policy
	if f.policy != "" {
		c, err := mcp.LoadConfig(f.policy)
		if err != nil {
			return err
		}
		base = &c.Ceiling
	}
	ceiling, mounts, allowWeaker, err := f.ceiling.Ceiling(cmd.Flags(), base)
	if err != nil {
		return err
	}
	client, err := app.OpenBackend(f.ceiling.Backend, f.ceiling.BackendOptions(nil))
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
		Keep:        f.keep,
		TraceDir:    f.traceDir,
		Logger:      slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})),
	}
	if f.keep {
		opts.OnKeep = cli.KeepSession
	}
	srv, err := mcp.New(opts)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	return srv.Run(ctx, &sdk.StdioTransport{})
}
