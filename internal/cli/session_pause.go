package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/sandbox"
)

// sessionPause is `session pause` (on) and `session unpause` (off).
func (a *App) sessionPause(on bool) *cobra.Command {
	verb, short := "unpause", "Let paused sessions continue where they stood"
	if on {
		verb, short = "pause", "Freeze every process of sessions where it stands (memory kept, no CPU used)"
	}
	cmd := &cobra.Command{
		Use:   verb + " ID...",
		Short: short,
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, ids []string) error {
			var errs []error
			for _, id := range ids {
				if err := a.setPaused(cmd.Context(), id, on); err != nil {
					errs = append(errs, err)
					continue
				}
				fmt.Fprintln(cmd.OutOrStdout(), id)
			}
			if len(errs) > 0 {
				return Fail(fmt.Errorf("session %s: %w", verb, errors.Join(errs...)))
			}
			return nil
		},
	}
	if on {
		cmd.Long = `Pause freezes every process of a session (the native backend through the
session's cgroup2 group, docker through the engine's pause): they keep their
memory, which still counts against the session's memory limit, and use no
CPU until 'agentbox session unpause'. A paused session refuses new commands.
Time keeps running while a session is paused: a command's --timeout and the
session's timeout count the paused time.`
	}
	return cmd
}

// setPaused pauses or unpauses the session made by session create as id.
func (a *App) setPaused(ctx context.Context, id string, on bool) error {
	sess, err := a.resumeSession(ctx, id)
	if err != nil {
		return err
	}
	if on {
		return sandbox.Pause(ctx, sess)
	}
	return sandbox.Unpause(ctx, sess)
}

// resumeSession reattaches to the session made by session create as id.
func (a *App) resumeSession(ctx context.Context, id string) (sandbox.Session, error) {
	e, err := loadSession(id)
	if err != nil {
		return nil, err
	}
	if err := a.needsFull(e.State.Backend); err != nil {
		return nil, err
	}
	c, err := a.OpenBackend(e.State.Backend, e.backendOptions(BackendOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Warn: io.Discard}))
	if err != nil {
		return nil, err
	}
	sess, err := c.Resume(ctx, e.State)
	if errors.Is(err, sandbox.ErrGone) {
		return nil, fmt.Errorf("session %s is gone (%v); agentbox session rm %s removes what is left", id, err, id)
	}
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", id, err)
	}
	return sess, nil
}
