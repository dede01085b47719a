// Command agentbox runs untrusted commands and AI agents in a sandbox.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// exitError carries a specific exit status out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}
func (e *exitError) Unwrap() error { return e.err }

// exitCode is the status agentbox itself fails with (bad input, backend
// failure), distinct from any status a sandboxed command returns.
const exitCode = 125

// subcommands are registered by each command's file through register, so
// that commands live in files of their own.
var subcommands []func() *cobra.Command

func register(f func() *cobra.Command) { subcommands = append(subcommands, f) }

func main() {
	if handOff == nil {
		os.Unsetenv(handedOffEnv) // the full build: nothing is handed on
	}
	root := newRootCmd()
	if err := root.Execute(); err != nil {
		fail(err)
	}
}

// fail reports err on stderr, unless it is an exitError without a
// message, and exits with its status (125 for any other error).
func fail(err error) {
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintln(os.Stderr, "agentbox:", ee.err)
		}
		os.Exit(ee.code)
	}
	fmt.Fprintln(os.Stderr, "agentbox:", err)
	os.Exit(exitCode)
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "agentbox",
		Short: "Run untrusted commands and AI agents in a sandbox",
		Long: `agentbox runs commands chosen by an AI agent inside a confined sandbox:
namespaces, pivot_root, landlock, seccomp, cgroups and a network namespace
with an allow-list egress proxy, so a mistake or an adversarial action
cannot touch the host, its credentials or unrelated data.

Environment:
  AGENTBOX_HOME       snapshots are kept in $AGENTBOX_HOME/snapshots (default
                      /var/lib/agentbox/snapshots for root,
                      ~/.local/share/agentbox/snapshots otherwise)
  AGENTBOX_STATE_DIR  the linux backend's session state (default
                      /run/agentbox/linux for root, else
                      $XDG_RUNTIME_DIR/agentbox/linux or /tmp/agentbox-UID/linux);
                      best on a tmpfs: every session start and end writes there`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &exitError{code: exitCode, err: fmt.Errorf("%w (see '%s --help')", err, c.CommandPath())}
	})
	for _, f := range subcommands {
		root.AddCommand(f())
	}
	return root
}
