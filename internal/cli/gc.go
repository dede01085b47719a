package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/linux"
)

// GCCommand is the gc command: each linked backend reaps its orphans.
func GCCommand(a *App) *cobra.Command {
	var opts GCOptions
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "Remove sandboxes left behind by a crashed agentbox",
		Long: `Remove what a crashed or killed agentbox left behind. A session normally
ends with the process that made it (agentbox exec, agentbox run), however
that process ends; gc is for what that could not clean: docker containers
labelled agentbox.session that are stopped, or whose owner process (label
agentbox.owner-pid, on this host) no longer exists; native (linux) sessions
whose owner is gone; kube Pods (label app.kubernetes.io/managed-by=agentbox)
that ended, or whose owner on this host is gone, in --namespace of the
cluster --kubeconfig names (the same flags as exec --backend kube; default
$KUBECONFIG, then ~/.kube/config, and its namespace); and sessions made by
agentbox session create whose sandbox died. Sessions of running processes
and live sessions of agentbox session create are left alone. A backend
this host lacks (no Docker engine, no kubeconfig) is skipped, and says
so; a cluster named with --kubeconfig or --namespace that cannot be
reached fails gc.

A native session whose state directory (AGENTBOX_STATE_DIR/ID) was removed
while it ran is invisible to its state; gc finds what it left from the host
itself, in every state directory: its init (a process that names the gone
directory in its environment, in gc's own mount namespace), its workspace
tmpfs or disk image still mounted on ID.workspace, and its cgroups (and
the empty cgroups of any session whose init is gone). Each is named with
why it is left; inits of an older agentbox, which do not name their state
directory, and sessions made in another mount namespace are not touched.`,
		Example: `  agentbox gc --dry-run
  agentbox gc --kubeconfig ~/.kube/prod.config --namespace agents`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var failed []error
			for _, name := range slices.Sorted(maps.Keys(a.gcs)) {
				err := a.gcs[name](cmd.Context(), a, opts, cmd.OutOrStdout())
				// A cluster the user named is not a backend this host
				// merely lacks: not reaching it is gc's failure.
				named := name == "kube" && opts.Kube != (KubeOptions{})
				switch {
				case errors.Is(err, sandbox.ErrUnavailable) && !named:
					fmt.Fprintf(cmd.ErrOrStderr(), "gc: %s: skipped: %v\n", name, err)
				case err != nil && strings.HasPrefix(err.Error(), name+":"):
					failed = append(failed, err)
				case err != nil:
					failed = append(failed, fmt.Errorf("%s: %w", name, err))
				}
			}
			if err := a.gcSessions(cmd.Context(), opts.DryRun, cmd.OutOrStdout()); err != nil {
				failed = append(failed, err)
			}
			if len(failed) > 0 {
				return Fail(fmt.Errorf("gc: %w", errors.Join(failed...)))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&opts.DryRun, "dry-run", false, "list what would be removed, remove nothing")
	RegisterKubeClusterFlags(cmd.Flags(), &opts.Kube)
	return cmd
}

// LinuxGC removes the native sessions whose owner is gone (their reaper
// was killed as well, or failed), in the state directory this environment
// names; then, host-wide, what native sessions whose own state directory
// is gone left running or mounted (their inits, workspace mounts and
// cgroups: linux.Client.Remains).
func LinuxGC(ctx context.Context, a *App, opts GCOptions, out io.Writer) error {
	dryRun := opts.DryRun
	c, err := a.OpenBackend("linux", BackendOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
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
		if !lc.Orphaned(st) {
			continue
		}
		found++
		if !dryRun {
			if err := lc.Delete(ctx, st); err != nil {
				errs = append(errs, fmt.Errorf("session %s: %w", st.ID, err))
				continue
			}
		}
		fmt.Fprintf(out, "linux: %s session %s: the process it belonged to is gone\n", verb, st.ID)
	}
	if found == 0 {
		fmt.Fprintln(out, "linux: no orphaned sessions")
	}
	// Then what sessions whose state directory is gone left on the host,
	// which the states above cannot name (host-wide; see linux.Remains).
	remains, err := lc.Remains()
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("find what sessions without state left: %w", err))...)
	}
	for _, r := range remains {
		if !dryRun {
			if err := r.End(); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		fmt.Fprintf(out, "linux: %s %s of session %s: %s\n", verb, r.What, r.Session, r.Why)
	}
	return errors.Join(errs...)
}

// gcSessions removes the detached sessions (agentbox session create)
// whose sandbox is gone; live ones are left to agentbox session rm.
func (a *App) gcSessions(ctx context.Context, dryRun bool, out io.Writer) error {
	list, err := listSessions()
	if err != nil {
		return fmt.Errorf("sessions: %w", err)
	}
	verb := "removed"
	if dryRun {
		verb = "would remove"
	}
	var errs []error
	for _, e := range list {
		if a.status(e) != "gone" {
			continue
		}
		if !dryRun {
			if err := a.removeSession(ctx, e); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		fmt.Fprintf(out, "%s: %s session %s: it no longer runs\n", e.State.Backend, verb, e.State.ID)
	}
	return errors.Join(errs...)
}
