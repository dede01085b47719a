package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/sandbox"
)

// Backends is the backends command.
func Backends(a *App) *cobra.Command {
	var asJSON bool
	var kube KubeOptions
	cmd := &cobra.Command{
		Use:   "backends",
		Short: "Show which policy parts each backend enforces on this host",
		Long: `Show, for each sandbox backend, which parts of a policy it enforces on this
host, detected now (kernel features, cgroup controllers, a Docker engine,
the Kubernetes cluster --kubeconfig names). A backend refuses a policy that needs a part it does not enforce, unless
--allow-weaker is given.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.printBackends(cmd.OutOrStdout(), asJSON, kube)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON object: backend -> enforced parts (or error)")
	RegisterKubeFlags(cmd.Flags(), &kube)
	return cmd
}

type backendReport struct {
	Enforces []sandbox.Part `json:"enforces,omitempty"`
	Notes    []string       `json:"notes,omitempty"`
	Error    string         `json:"error,omitempty"`
}

// noter is implemented by backends that can say how they enforce each part
// on this host (cgroup version, landlock ABI, ...).
type noter interface{ Notes() []string }

func (a *App) printBackends(w io.Writer, asJSON bool, kube KubeOptions) error {
	names := a.BackendNames()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	reports := map[string]backendReport{}
	for _, n := range names {
		c, err := a.OpenBackend(n, BackendOptions{Logger: quiet, Warn: io.Discard, Kube: kube})
		if err != nil {
			reports[n] = backendReport{Error: err.Error()}
			continue
		}
		r := backendReport{Enforces: c.Enforces()}
		if nc, ok := c.(noter); ok {
			r.Notes = nc.Notes()
		}
		reports[n] = r
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(reports)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprint(tw, "PART")
	for _, n := range names {
		fmt.Fprint(tw, "\t", n)
	}
	fmt.Fprintln(tw)
	for _, part := range sandbox.AllParts {
		fmt.Fprint(tw, part)
		for _, n := range names {
			mark := "no"
			switch r := reports[n]; {
			case r.Error != "":
				mark = "-"
			case slices.Contains(r.Enforces, part):
				mark = "yes"
			}
			fmt.Fprint(tw, "\t", mark)
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range names {
		r := reports[n]
		if r.Error != "" {
			fmt.Fprintf(w, "\n%s: unavailable: %s\n", n, r.Error)
		}
		if len(r.Notes) > 0 {
			fmt.Fprintf(w, "\n%s:\n", n)
			for _, note := range r.Notes {
				fmt.Fprintf(w, "  %s\n", note)
			}
		}
	}
	return nil
}
