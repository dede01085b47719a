// Package cli is agentbox's command line: each command and backend of the
// agentbox programs, and the App that a program's main composes from
// them. The programs differ only in what they link (see cmd/agentbox and
// cmd/agentbox-full); no command is written twice.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/didyoumean"
	"github.com/agentbox/agentbox/sandbox"
)

// ExitFailure is the status agentbox itself fails with (bad input, a
// backend failure), distinct from any status a sandboxed command returns.
const ExitFailure = 125

// ExitError carries a specific exit status out of a command; with a nil
// Err nothing is printed.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}
func (e *ExitError) Unwrap() error { return e.Err }

// Fail is err as agentbox's own failure (exit status 125).
func Fail(err error) error { return &ExitError{Code: ExitFailure, Err: err} }

// Failf is Fail of a formatted error.
func Failf(format string, args ...any) error { return Fail(fmt.Errorf(format, args...)) }

// BackendOptions is what the CLI hands every backend constructor.
type BackendOptions struct {
	Snapshots sandbox.SnapshotStore
	Logger    *slog.Logger
	Image     string
	Warn      io.Writer
	// Server is the agentbox serve address of the remote backend
	// (--server); empty: $AGENTBOX_SERVER.
	Server string
	// Kube are the kube backend's cluster options.
	Kube KubeOptions
}

// KubeOptions say where the kube backend's sessions run: --kubeconfig
// (empty: $KUBECONFIG, then ~/.kube/config), --namespace (empty: the
// kubeconfig's), --runtime-class (empty: the node's default runtime) and
// --egress-address (empty: no network allow-list).
type KubeOptions struct {
	Kubeconfig    string `json:"kubeconfig,omitempty"`
	Namespace     string `json:"namespace,omitempty"`
	RuntimeClass  string `json:"runtime_class,omitempty"`
	EgressAddress string `json:"egress_address,omitempty"`
}

// Backend makes a backend's client.
type Backend func(BackendOptions) (sandbox.Client, error)

// GC reaps what one backend's crashed or killed sessions left behind,
// listing what it removes (or would, with opts.DryRun) on out. A backend
// that cannot be reached returns an error wrapping sandbox.ErrUnavailable.
type GC func(ctx context.Context, a *App, opts GCOptions, out io.Writer) error

// GCOptions are gc's flags that the backends' GCs read.
type GCOptions struct {
	// DryRun lists what would be removed and removes nothing.
	DryRun bool
	// Kube says which cluster and namespace the kube backend reaps
	// (--kubeconfig, --namespace); RuntimeClass and EgressAddress are
	// never set, as they do not say where Pods are.
	Kube KubeOptions
}

// App is one agentbox program: the commands and backends it links, and,
// for a program that does not link them all, where the others run.
type App struct {
	commands []func(*App) *cobra.Command
	backends map[string]Backend
	gcs      map[string]GC
	// full, when set, is the program that runs what this one does not
	// link (the Catalog's commands and backends).
	full *forwarder
}

// New is an App with no commands or backends yet.
func New() *App { return &App{backends: map[string]Backend{}, gcs: map[string]GC{}} }

// Add links commands.
func (a *App) Add(cmds ...func(*App) *cobra.Command) { a.commands = append(a.commands, cmds...) }

// AddBackend links a --backend, and how its orphans are reaped (gc may be
// nil).
func (a *App) AddBackend(name string, b Backend, gc GC) {
	a.backends[name] = b
	if gc != nil {
		a.gcs[name] = gc
	}
}

// BackendNames lists the linked backends, sorted.
func (a *App) BackendNames() []string {
	names := make([]string, 0, len(a.backends))
	for n := range a.backends {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// OpenBackend builds the named backend's client.
func (a *App) OpenBackend(name string, opts BackendOptions) (sandbox.Client, error) {
	newClient, ok := a.backends[name]
	if !ok {
		known := a.BackendNames()
		if a.full != nil {
			known = append(known, CatalogBackends...)
			slices.Sort(known)
		}
		msg := fmt.Sprintf("unknown backend %q (choose one of %s)", name, strings.Join(known, ", "))
		if near := didyoumean.Nearest(name, known); near != "" {
			msg = fmt.Sprintf("unknown backend %q: did you mean %q? (choose one of %s)", name, near, strings.Join(known, ", "))
		}
		return nil, errors.New(msg)
	}
	c, err := newClient(opts)
	if err != nil {
		return nil, fmt.Errorf("backend %s: %w", name, err)
	}
	return c, nil
}

// Main runs the command line and exits.
func (a *App) Main() {
	if a.full == nil {
		os.Unsetenv(forwardedEnv) // this program links everything: nothing goes on
	}
	if err := a.root().Execute(); err != nil {
		exit(err)
	}
	os.Exit(0)
}

// exit reports err on stderr, unless it is an ExitError without a
// message, and exits with its status (125 for any other error).
func exit(err error) {
	var ee *ExitError
	if errors.As(err, &ee) {
		if ee.Err != nil {
			fmt.Fprintln(os.Stderr, "agentbox:", ee.Err)
		}
		os.Exit(ee.Code)
	}
	fmt.Fprintln(os.Stderr, "agentbox:", err)
	os.Exit(ExitFailure)
}

func (a *App) root() *cobra.Command {
	root := &cobra.Command{
		Use:   "agentbox",
		Short: "Run untrusted commands and AI agents in a sandbox",
		Long: `agentbox runs commands chosen by an AI agent inside a confined sandbox:
namespaces, pivot_root, landlock, seccomp, cgroups and a network namespace
with an allow-list egress proxy, so a mistake or an adversarial action
cannot touch the host, its credentials or unrelated data.

Environment:
  AGENTBOX_HOME       snapshots and sessions are kept in $AGENTBOX_HOME
                      (default /var/lib/agentbox for root,
                      ~/.local/share/agentbox otherwise)
  AGENTBOX_STATE_DIR  the linux backend's session state (default
                      /run/agentbox/linux for root, else
                      $XDG_RUNTIME_DIR/agentbox/linux or /tmp/agentbox-UID/linux);
                      best on a tmpfs: every session start and end writes there`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return Failf("%w (see '%s --help')", err, c.CommandPath())
	})
	for _, f := range a.commands {
		root.AddCommand(f(a))
	}
	if a.full != nil {
		for _, c := range Catalog {
			root.AddCommand(a.full.stub(c))
		}
	}
	return root
}
