package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/sandbox"
)

// sessionExtend is `session extend`: the idle timeout starts again.
func (a *App) sessionExtend() *cobra.Command {
	return &cobra.Command{
		Use:   "extend ID...",
		Short: "Start the idle timeout of sessions again, as a command run in them would",
		Long: `A session made with --idle-timeout ends once it has been idle that long: no
command run in it, none running, and no 'session extend'. Extend counts as a
use and nothing else. A background process a finished command left does not
keep a session; neither does 'session ls'. The native backend enforces the
idle timeout from inside the session (its init), whatever becomes of the
agentbox that made it.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, ids []string) error {
			var errs []error
			for _, id := range ids {
				sess, err := a.resumeSession(cmd.Context(), id)
				if err == nil {
					err = sandbox.Extend(cmd.Context(), sess)
				}
				if err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", id, err))
					continue
				}
				// Extend of a session without an idle timeout succeeds
				// (there is nothing to put off), but a user who expected
				// it to lengthen the session's life is told why not.
				if sess.State().Spec.Policy.Resources.IdleTimeout <= 0 {
					fmt.Fprintf(cmd.ErrOrStderr(), "agentbox: session %s has no idle timeout, so extend changes nothing (only 'session create --idle-timeout' sets one; its --timeout is per command)\n", id)
				}
				fmt.Fprintln(cmd.OutOrStdout(), id)
			}
			if len(errs) > 0 {
				return Fail(fmt.Errorf("session extend: %w", errors.Join(errs...)))
			}
			return nil
		},
	}
}
