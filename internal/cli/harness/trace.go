package harness

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

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
	var asJSON, asHTML bool
	var output string
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
key, and the agent file's redact patterns) before it is written.

--html writes the trace as one self-contained HTML page for a reviewer
(the run's facts and counts, each turn with its tool calls, commands,
durations, violations, inputs and outputs, and the promoted files with
their hashes); it loads nothing and runs no script, so it can be mailed
or archived with the outputs.`,
		Example: `  agentbox run --agent agent.yaml --trace run.jsonl "reconcile"
  agentbox trace show run.jsonl
  agentbox trace show --html -o run.html run.jsonl`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			evs, err := trace.Read(args[0])
			if err != nil {
				return cli.Fail(err)
			}
			if asJSON && asHTML {
				return cli.Fail(errors.New("trace show: --json and --html each choose the output format; give one"))
			}
			w := cmd.OutOrStdout()
			if output != "" {
				f, err := os.Create(output)
				if err != nil {
					return cli.Fail(fmt.Errorf("trace show: %w", err))
				}
				defer f.Close()
				w = f
			}
			switch {
			case asJSON:
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				err = enc.Encode(evs)
			case asHTML:
				err = trace.RenderHTML(w, evs)
			default:
				err = trace.RenderTimeline(w, evs, opts)
			}
			if err == nil && output != "" {
				err = w.(*os.File).Close()
			}
			if err != nil {
				return cli.Fail(fmt.Errorf("trace show: %w", err))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the events as one JSON array instead")
	cmd.Flags().BoolVar(&opts.Full, "full", false, "print tool inputs, outputs and instructions whole")
	cmd.Flags().BoolVar(&asHTML, "html", false, "write one self-contained HTML page (open it in a browser)")
	cmd.Flags().StringVarP(&output, "output", "o", "", "write to `FILE` instead of stdout")
	return cmd
}
