package harness

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/cli"
	"github.com/agentbox/agentbox/trace"
)

// Trace is the trace command.
func Trace(a *cli.App) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "trace",
		Short: "Inspect agent run traces (JSONL)",
	}
	cmd.AddCommand(newTraceShowCmd())
	return cmd
}

func newTraceShowCmd() *cobra.Command {
	var asJSON bool
	var opts trace.TimelineOptions
	cmd := &cobra.Command{
		Use:   "show FILE",
		Short: "Print a run trace as a readable timeline",
		Long: `Print a run trace (written by agentbox run --trace FILE) as a timeline:
time since the start, turn, each model request (with the hash of its
instructions, and the instructions themselves when they change) and
response, each tool call with its input and the output the model read,
sandbox commands with exit codes and durations, approvals, promotions
with the hash of each file, and errors and policy violations marked with
!! at the start of the line. Long inputs and outputs show their first
lines; --full shows them whole.

The trace holds no secret: every text passes a redactor (common key and
token shapes, the credentials the egress proxy injects, the model's API
key, and the agent file's redact patterns) before it is written.`,
		Example: `  agentbox run --agent agent.yaml --trace run.jsonl "reconcile"
  agentbox trace show run.jsonl`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			evs, err := trace.Read(args[0])
			if err != nil {
				return cli.Fail(err)
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(evs)
			}
			if err := trace.RenderTimeline(cmd.OutOrStdout(), evs, opts); err != nil {
				return cli.Fail(fmt.Errorf("trace show: %w", err))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the events as one JSON array instead")
	cmd.Flags().BoolVar(&opts.Full, "full", false, "print tool inputs, outputs and instructions whole")
	return cmd
}
