//go:build !lean

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/docker"
	"github.com/agentbox/agentbox/sandbox/linux"
)

func init() { register(newGCCmd) }

// gcHooks reap one backend's orphans each. A backend that leaves host
// state behind after a crash adds itself here from its own file; an
// unavailable backend (no engine) returns an error wrapping
// sandbox.ErrUnavailable and is skipped with a note.
var gcHooks = map[string]func(ctx context.Context, dryRun bool, out io.Writer) error{
	"docker": dockerGC,
	"linux":  linuxGC,
}

func newGCCmd() *cobra.Command {
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "Remove sandboxes left behind by a crashed agentbox",
		Long: `Remove what a crashed or killed agentbox left behind: docker containers
labelled agentbox.session that are stopped, or whose owner process (label
agentbox.owner-pid, on this host) no longer exists; and native (linux)
sessions that an agentbox exec made for itself and could not close (it was
killed): their init, cgroups and directories. Sessions of running agentbox
processes, and sessions made through the Go API, are left alone.`,
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

// linuxGC removes the native sessions whose `agentbox exec` owner is gone
// (see ownerLabel), in the state directory this environment names.
func linuxGC(ctx context.Context, dryRun bool, out io.Writer) error {
	c, err := openBackend("linux", backendOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return err
	}
	lc, ok := c.(*linux.Client)
	if !ok {
		return fmt.Errorf("the linux backend is a %T", c)
	}
	states, err := lc.List()
	if err != nil {
		return err
	}
	verb := "removed"
	if dryRun {
		verb = "would remove"
	}
	var errs []error
	found := 0
	for _, st := range states {
		owner := st.Spec.Labels[ownerLabel]
		if owner == "" || ownerAlive(owner) {
			continue
		}
		found++
		if !dryRun {
			if err := lc.Delete(ctx, st); err != nil {
				errs = append(errs, fmt.Errorf("session %s: %w", st.ID, err))
				continue
			}
		}
		fmt.Fprintf(out, "linux: %s session %s: its agentbox exec (pid %s) is gone\n", verb, st.ID, owner)
	}
	if found == 0 {
		fmt.Fprintln(out, "linux: no orphaned sessions")
	}
	return errors.Join(errs...)
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

// ownerAlive reports whether mark names a running agentbox process. A pid
// reused by another program counts as gone; one reused by another agentbox
// counts as alive (the safe side: the session is kept).
func ownerAlive(mark string) bool {
	pid, err := strconv.Atoi(mark)
	if err != nil || pid <= 0 {
		return false
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	argv0, _, _ := bytes.Cut(cmdline, []byte{0})
	return strings.HasPrefix(filepath.Base(string(argv0)), "agentbox")
}
