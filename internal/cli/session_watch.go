package cli

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/sandbox"
)

// sessionWatch is `session watch`: a session's workspace changes as JSON
// lines.
func (a *App) sessionWatch() *cobra.Command {
	return &cobra.Command{
		Use:   "watch ID [PATH]",
		Short: "Print the changes under a session's workspace path as JSON lines",
		Long: `Watch prints one JSON object a line for each change under PATH (a path in
the session's workspace, default the whole workspace), in every directory
below it, including ones made later:

  {"op":"create","path":"src/a.go","time":"..."}
  {"op":"write","path":"src/a.go","time":"..."}
  {"op":"rename","path":"src/b.go","old_path":"src/a.go","time":"..."}
  {"op":"remove","path":"src/b.go","time":"..."}

Paths are relative to the workspace; is_dir marks directories. An
{"op":"overflow","error":"..."} line says events were lost (this reader or
the kernel fell behind, or a limit of watched directories was reached):
list the workspace again to know where it stands. Watch runs until
interrupted, or until PATH itself is removed or the session ends. The
native, docker and local backends watch the workspace from the host
(inotify); others refuse by name.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := interruptible(cmd.Context())
			defer stop()
			sess, err := a.resumeSession(ctx, args[0])
			if err != nil {
				return Fail(err)
			}
			p := "."
			if len(args) == 2 {
				p = args[1]
			}
			ch, err := sandbox.Watch(ctx, sess, p)
			if err != nil {
				return Fail(fmt.Errorf("session %s: %w", args[0], err))
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			for ev := range ch {
				if err := enc.Encode(ev); err != nil {
					return Fail(fmt.Errorf("write event: %w", err))
				}
			}
			return nil
		},
	}
}
