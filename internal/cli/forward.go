package cli

import (
	"errors"
	"os"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/sibling"
)

// The agentbox command is built as two programs from this package (see
// docs/ARCHITECTURE.md, "Programs"):
//
//   - agentbox, what a shell-driven agent runs per command: exec, session
//     and snapshot on the native and local backends, and nothing whose
//     dependencies cost start-up time (its linked packages are checked,
//     cmd/agentbox/deps.txt);
//   - agentbox-full, every command and backend, among them those that
//     bring an SDK: the agent harness (OpenAI, OpenTelemetry, a JSON
//     Schema compiler) and the Docker Engine client.
//
// agentbox runs the Catalog's commands and backends by replacing itself
// with the agentbox-full beside it, checked by package sibling's rule.

// FullProgram is the program that links every command and backend.
const FullProgram = "agentbox-full"

// forwardedEnv is set in the environment of the agentbox-full agentbox
// forwards to; agentbox-full removes it first thing.
const forwardedEnv = "AGENTBOX_FORWARDED"

// Entry is a command agentbox forwards, with the short help its root help
// lists.
type Entry struct{ Name, Short string }

// Catalog are the commands that only agentbox-full links. The two
// programs' help must agree (cmd/agentbox's tests check it).
var Catalog = []Entry{
	{"backends", "Show which policy parts each backend enforces on this host"},
	{"gc", "Remove sandboxes left behind by a crashed agentbox"},
	{"image", "Manage the docker backend's base image"},
	{"mcp", "Serve sandboxes to an MCP client (Claude Desktop, an IDE, any agent) on stdio or HTTP"},
	{"promote", "Copy checked outputs out of a workspace, with a provenance record"},
	{"run", "Run an AI agent whose commands and file edits are confined to a sandbox"},
	{"serve", "Serve sandboxes over HTTP to tenants holding API keys"},
	{"trace", "Inspect agent run traces (JSONL)"},
}

// CatalogBackends are the backends that only agentbox-full links.
var CatalogBackends = []string{"docker", "kube", "remote"}

// ForwardCatalog makes a's program run the Catalog's commands and
// backends in agentbox-full.
func (a *App) ForwardCatalog() { a.full = &forwarder{} }

// Forwards reports whether backend is run by agentbox-full (not linked
// here, but known there).
func (a *App) forwards(backend string) bool {
	if a.full == nil {
		return false
	}
	if _, linked := a.backends[backend]; linked {
		return false
	}
	for _, b := range CatalogBackends {
		if b == backend {
			return true
		}
	}
	return false
}

// forward replaces this process with agentbox-full run with the same
// arguments; what names what needs it, for the error when it cannot.
func (a *App) forward(what string) error {
	if a.full == nil {
		return Failf("%s: not linked into this program", what)
	}
	return a.full.exec(what)
}

type forwarder struct{}

// stub is a Catalog command that takes its arguments unparsed (so --help
// reaches the real command) and forwards, as do `agentbox help CMD` and
// shell completion (`agentbox __complete CMD ...`).
func (f *forwarder) stub(e Entry) *cobra.Command {
	cmd := &cobra.Command{
		Use:                e.Name,
		Short:              e.Short,
		DisableFlagParsing: true,
		RunE:               func(*cobra.Command, []string) error { return f.exec(e.Name) },
	}
	cmd.SetHelpFunc(func(*cobra.Command, []string) { exit(f.exec(e.Name)) })
	cmd.ValidArgsFunction = func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		cobra.CompErrorln(f.exec(e.Name).Error())
		return nil, cobra.ShellCompDirectiveError
	}
	return cmd
}

// exec runs agentbox-full with this process's arguments and environment;
// it returns only on failure.
func (f *forwarder) exec(what string) error {
	if os.Getenv(forwardedEnv) != "" {
		// Threat: an agentbox-full that is a copy of agentbox would
		// forward to itself forever.
		return Failf("%s: %s forwarded again: it is not the full program; build it with scripts/build.sh or go install ./cmd/...", what, FullProgram)
	}
	p, err := sibling.Open(FullProgram)
	if errors.Is(err, os.ErrNotExist) {
		return Failf("%s needs %s, which is not beside this agentbox; install both (go install ./cmd/... or scripts/build.sh)", what, FullProgram)
	}
	if err != nil {
		return Failf("%s: %w", what, err)
	}
	defer p.Close() // reached only if the exec fails
	// syscall.Exec, not a raw execveat: it restores the soft
	// RLIMIT_NOFILE the Go runtime raised (so agentbox-full and the
	// sandboxed commands it starts do not inherit the raised limit) and
	// holds the runtime's lock against new threads.
	argv := append([]string{p.Name}, os.Args[1:]...)
	err = syscall.Exec(p.Path(), argv, append(os.Environ(), forwardedEnv+"=1"))
	return Failf("%s: run %s: %w", what, p.Name, err)
}

// check names what of an exec agentbox-full must run, "" when this
// program can; used by commands that take --backend.
func (a *App) needsFull(backend string) error {
	if a.forwards(backend) {
		return a.forward("--backend " + backend)
	}
	return nil
}
