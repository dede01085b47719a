//go:build !lean

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/docker"
)

func init() { register(newGCCmd) }

// gcHooks reap one backend's orphans each. A backend that leaves host
// state behind after a crash adds itself here from its own file; an
// unavailable backend (no engine) returns an error wrapping
// sandbox.ErrUnavailable and is skipped with a note.
var gcHooks = map[string]func(ctx context.Context, dryRun bool, out io.Writer) error{
	"docker": dockerGC,
}

func newGCCmd() *cobra.Command {
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "Remove sandboxes left behind by a crashed agentbox",
		Long: `Remove what a crashed or killed agentbox left behind: docker containers
labelled agentbox.session that are stopped, or whose owner process (label
agentbox.owner-pid, on this host) no longer exists. Sessions of running
agentbox processes are left alone.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var failed []error
			for _, name := range slices.Sorted(maps.Keys(gcHooks)) {
				err := gcHooks[name](cmd.Context(), dryRun, cmd.OutOrStdout())
				switch {
				case errors.Is(err, sandbox.ErrUnavailable):
					fmt.Fprintf(cmd.ErrOrStderr(), "gc: %s: skipped: %v\n", name, err)
				case err != nil:
					failed = append(failed, fmt.Errorf("%s: %w", name, err))
				}
			}
			if len(failed) > 0 {
				return &exitError{code: exitCode, err: fmt.Errorf("gc: %w", errors.Join(failed...))}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "list what would be removed, remove nothing")
	return cmd
}

func dockerGC(ctx context.Context, dryRun bool, out io.Writer) error {
	c, err := docker.New(docker.Options{})
	if err != nil {
		return err
	}
	defer c.Close()
	reaped, err := c.GC(ctx, docker.GCOptions{DryRun: dryRun})
	verb := "removed"
	if dryRun {
		verb = "would remove"
	}
	for _, r := range reaped {
		fmt.Fprintf(out, "docker: %s container %s (session %s): %s\n", verb, r.Container, r.Session, r.Reason)
	}
	if len(reaped) == 0 {
		fmt.Fprintln(out, "docker: no orphaned containers")
	}
	return err
}
