package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/datadir"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/snapshot"
)

// sessionFork is `session fork`: a new session from a session's
// workspace snapshot.
func (a *App) sessionFork() *cobra.Command {
	var store string
	cmd := &cobra.Command{
		Use:   "fork ID",
		Short: "Create a session from a snapshot of another's workspace and print its id",
		Long: `Fork saves a snapshot of session ID's workspace (in --store) and creates a
new session from it, with the same spec: its own workspace holding ID's files
as they stood, and none of ID's processes (their memory is not copied: no
backend here can save it, see 'agentbox session hibernate'). ID is paused
while the snapshot is taken, where its backend can pause; a paused session
stays paused. The fork lives until 'agentbox session rm'.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := interruptible(cmd.Context())
			defer stop()
			id := args[0]
			e, err := loadSession(id)
			if err != nil {
				return Fail(err)
			}
			if err := a.needsFull(e.State.Backend); err != nil {
				return err
			}
			st, err := snapshot.Open(store, snapshot.Options{})
			if err != nil {
				return Fail(fmt.Errorf("snapshot store %s: %w", store, err))
			}
			c, err := a.OpenBackend(e.State.Backend, e.backendOptions(BackendOptions{Snapshots: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Warn: io.Discard}))
			if err != nil {
				return Fail(err)
			}
			sess, err := c.Resume(ctx, e.State)
			if err != nil {
				return Fail(fmt.Errorf("session %s: %w", id, err))
			}
			fork, err := sandbox.Fork(ctx, c, sess)
			if err != nil {
				return Fail(fmt.Errorf("session fork %s: %w", id, err))
			}
			if err := saveSession(sessionEntry{State: fork.State(), Kube: e.Kube}); err != nil {
				_ = fork.Close(context.WithoutCancel(ctx))
				return Fail(fmt.Errorf("session fork %s: %w", id, err))
			}
			fmt.Fprintln(cmd.OutOrStdout(), fork.ID())
			return nil
		},
	}
	cmd.Flags().StringVar(&store, "store", datadir.Snapshots(), "snapshot store `DIR` the fork's snapshot is saved in")
	return cmd
}

// sessionHibernate is `session hibernate`: it says what CRIU makes of a
// session on this host.
func (a *App) sessionHibernate() *cobra.Command {
	return &cobra.Command{
		Use:   "hibernate ID",
		Short: "Save a session's processes to disk with CRIU, so it holds no memory (refused, with the reason, where CRIU cannot)",
		Long: `Hibernate would save every process of a session with its memory (CRIU)
and end them, for a later restore. No backend does it yet: the native one
says why on this host (what 'criu check' reports, or the landlock domain
CRIU cannot save), and nothing is changed. What works instead is the
workspace-only stop: 'agentbox session fork ID' copies the files to a new
session, 'agentbox session rm ID' ends the old one.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sess, err := a.resumeSession(cmd.Context(), args[0])
			if err != nil {
				return Fail(err)
			}
			if err := sandbox.Hibernate(cmd.Context(), sess); err != nil {
				return Fail(fmt.Errorf("session hibernate %s: %w", args[0], err))
			}
			fmt.Fprintln(cmd.OutOrStdout(), args[0])
			return nil
		},
	}
}
