package harness

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/artifact"
	"github.com/agentbox/agentbox/internal/cli"
	"github.com/agentbox/agentbox/sandbox"
)

// Promote is the promote command.
func Promote(a *cli.App) *cobra.Command {
	var (
		from, rulesFile, to string
		runID, traceID      string
		asJSON              bool
	)
	cmd := &cobra.Command{
		Use:   "promote --from DIR --rules RULES --to DIR",
		Short: "Copy checked outputs out of a workspace, with a provenance record",
		Long: `Copy the outputs of a workspace to a destination only after every rule in
the rules file passes: glob, required, max_size, content types detected from
the bytes (not the extension), an optional JSON schema, no symlinks, hard
links or special files. Passing files are staged beside the destination and
moved in atomically with ` + artifact.RecordName + ` (sha256, size, type,
source path, run id, time, rule results). If any rule fails nothing is
promoted, and every file and the rule it broke is listed.

--from takes a workspace directory, or the state file of a session (written
by agentbox run --save-state), in which case the session's workspace on the
host is promoted from.

Promoting from a directory cannot run the rules' validate commands (they run
in a sandbox session, from agentbox run or the Go API); a rule with one fails
here.

Exit status: 0 when promoted, 125 when refused or on any error.`,
		Example: `  # rules.yaml:
  #   outputs:
  #     - glob: out/report.md
  #       required: true
  #       max_size: 1MiB
  #       types: [text/markdown]
  #     - glob: out/**/*.json
  #       types: [application/json]
  #       json_schema: report.schema.json
  agentbox promote --from ./workspace --rules rules.yaml --to ./results --run-id run-42`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fail := func(err error) error { return cli.Fail(fmt.Errorf("promote: %w", err)) }
			if from == "" || rulesFile == "" || to == "" {
				return fail(errors.New("--from, --rules and --to are all required"))
			}
			rules, err := artifact.LoadRules(rulesFile)
			if err != nil {
				return fail(err)
			}
			dir, err := promoteSourceDir(from)
			if err != nil {
				return fail(err)
			}
			src, err := artifact.NewDirSource(dir)
			if err != nil {
				return fail(err)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			rec, err := artifact.Promote(ctx, src, rules, to, artifact.PromoteOptions{RunID: runID, TraceID: traceID})
			if err != nil {
				var re *artifact.RejectedError
				if asJSON && errors.As(err, &re) {
					_ = writePromoteJSON(cmd.OutOrStdout(), map[string]any{"promoted": false, "violations": re.Violations})
				}
				return fail(err)
			}
			if asJSON {
				return writePromoteJSON(cmd.OutOrStdout(), rec)
			}
			printPromoted(cmd.OutOrStdout(), rec, to)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&from, "from", "", "workspace `DIR` to promote from, or a session state FILE (agentbox run --save-state) whose workspace is used")
	fl.StringVar(&rulesFile, "rules", "", "rules file (YAML, or JSON when it ends in .json)")
	fl.StringVar(&to, "to", "", "destination directory (created if missing; existing files are never overwritten)")
	fl.StringVar(&runID, "run-id", "", "run id to record in the provenance")
	fl.StringVar(&traceID, "trace-id", "", "trace id to record in the provenance")
	fl.BoolVar(&asJSON, "json", false, "print the provenance record (or the violations) as JSON")
	return cmd
}

// printPromoted lists the promoted files with sizes and hashes.
func printPromoted(w io.Writer, rec *artifact.Record, to string) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PATH\tSIZE\tTYPE\tSHA256")
	for _, f := range rec.Files {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", f.Path, f.Size, f.Type, f.SHA256)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "promoted %d file(s) to %s (record: %s)\n", len(rec.Files), to, artifact.RecordName)
}

// writePromoteJSON prints v indented.
func writePromoteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// promoteSourceDir is the workspace to promote from: from itself when it
// is a directory, else the workspace recorded in a session state file.
func promoteSourceDir(from string) (string, error) {
	fi, err := os.Stat(from)
	if err != nil {
		return "", fmt.Errorf("--from %s: %w", from, err)
	}
	if fi.IsDir() {
		return from, nil
	}
	data, err := os.ReadFile(from)
	if err != nil {
		return "", fmt.Errorf("--from %s: %w", from, err)
	}
	st, err := sandbox.UnmarshalState(data)
	if err != nil {
		return "", fmt.Errorf("--from %s is neither a directory nor a session state file: %w", from, err)
	}
	if st.Workspace == "" {
		return "", fmt.Errorf("--from %s: session %s has no host workspace to promote from", from, st)
	}
	if _, err := os.Stat(st.Workspace); err != nil {
		return "", fmt.Errorf("--from %s: the workspace of session %s is gone (%w); restore its snapshot first (agentbox snapshot restore)", from, st, err)
	}
	return st.Workspace, nil
}
