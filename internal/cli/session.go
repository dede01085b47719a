package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/datadir"
	"github.com/agentbox/agentbox/sandbox"
)

// A detached session is one that `agentbox session create` made and left
// running for later commands (`agentbox exec --session ID`). The CLI keeps
// its state in datadir.Sessions(), one JSON file per session, written at
// create and removed at rm.

// sessionEntry is what the CLI keeps of a detached session.
type sessionEntry struct {
	State sandbox.State `json:"state"`
	// TempWorkspace is a workspace the CLI made for the session (to
	// materialize a manifest into), removed with it.
	TempWorkspace string `json:"temp_workspace,omitempty"`
	// Kube are the cluster options a kube session was made with (the
	// kubeconfig's absolute path, never its contents), so that the
	// commands that reach it later talk to the same cluster.
	Kube *KubeOptions `json:"kube,omitempty"`
}

// backendOptions are o with what reaching e's backend again needs.
func (e sessionEntry) backendOptions(o BackendOptions) BackendOptions {
	if e.Kube != nil {
		o.Kube = *e.Kube
	}
	return o
}

// sessionFile is where the entry of session id is kept.
func sessionFile(id string) string { return filepath.Join(datadir.Sessions(), id+".json") }

// saveSession writes e, whole or not at all, readable by this user only.
func saveSession(e sessionEntry) error {
	dir := datadir.Sessions()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("session registry %s: %w", dir, err)
	}
	b, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".session-*")
	if err != nil {
		return fmt.Errorf("session registry %s: %w", dir, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("write session %s: %w", e.State.ID, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write session %s: %w", e.State.ID, err)
	}
	return os.Rename(tmp.Name(), sessionFile(e.State.ID))
}

// loadSession reads the entry of session id.
func loadSession(id string) (sessionEntry, error) {
	if id == "" || strings.ContainsAny(id, "/\x00") || strings.HasPrefix(id, ".") {
		return sessionEntry{}, fmt.Errorf("%q is not a session id", id)
	}
	b, err := os.ReadFile(sessionFile(id))
	if errors.Is(err, fs.ErrNotExist) {
		return sessionEntry{}, fmt.Errorf("no session %s (agentbox session ls lists them)", id)
	}
	if err != nil {
		return sessionEntry{}, fmt.Errorf("session %s: %w", id, err)
	}
	var raw struct {
		State         json.RawMessage `json:"state"`
		TempWorkspace string          `json:"temp_workspace"`
		Kube          *KubeOptions    `json:"kube"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return sessionEntry{}, fmt.Errorf("session %s: %s: %w", id, sessionFile(id), err)
	}
	st, err := sandbox.UnmarshalState(raw.State)
	if err != nil {
		return sessionEntry{}, fmt.Errorf("session %s: %w", id, err)
	}
	return sessionEntry{State: st, TempWorkspace: raw.TempWorkspace, Kube: raw.Kube}, nil
}

// listSessions reads every entry, sorted by creation.
func listSessions() ([]sessionEntry, error) {
	names, err := os.ReadDir(datadir.Sessions())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []sessionEntry
	for _, n := range names {
		id, ok := strings.CutSuffix(n.Name(), ".json")
		if !ok || strings.HasPrefix(id, ".") {
			continue
		}
		if e, err := loadSession(id); err == nil {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].State.CreatedAt.Before(out[j].State.CreatedAt) })
	return out, nil
}

// aliveChecker is a backend that can tell whether a session still runs
// without touching it.
type aliveChecker interface{ Alive(sandbox.State) bool }

// statusReporter is a backend whose sessions' status is said by someone
// else, asked each time (remote: the server).
type statusReporter interface {
	Status(ctx context.Context, st sandbox.State) (string, error)
}

// status is "running", "paused", "gone", or "unknown" for a backend this program
// does not link or that cannot say (a remote server that cannot be reached).
func (a *App) status(e sessionEntry) string {
	st := e.State
	if _, linked := a.backends[st.Backend]; !linked {
		return "unknown"
	}
	c, err := a.OpenBackend(st.Backend, e.backendOptions(BackendOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Warn: io.Discard}))
	if err != nil {
		return "unknown"
	}
	if sr, ok := c.(statusReporter); ok {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s, err := sr.Status(ctx, st)
		if err != nil {
			return "unknown"
		}
		return s
	}
	ac, ok := c.(aliveChecker)
	if !ok {
		return "unknown"
	}
	if !ac.Alive(st) {
		return "gone"
	}
	if sess, err := c.Resume(context.Background(), st); err == nil {
		if paused, _ := sandbox.Paused(context.Background(), sess); paused {
			return "paused"
		}
	}
	return "running"
}

// removeSession ends session e (what is left of it, when it is gone) and
// forgets it.
func (a *App) removeSession(ctx context.Context, e sessionEntry) error {
	c, err := a.OpenBackend(e.State.Backend, e.backendOptions(BackendOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Warn: io.Discard}))
	if err != nil {
		return err
	}
	if err := c.Delete(ctx, e.State); err != nil {
		return fmt.Errorf("session %s: %w", e.State.ID, err)
	}
	if e.TempWorkspace != "" {
		if err := os.RemoveAll(e.TempWorkspace); err != nil {
			return fmt.Errorf("session %s: remove its workspace: %w", e.State.ID, err)
		}
	}
	if err := os.Remove(sessionFile(e.State.ID)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("session %s: %w", e.State.ID, err)
	}
	return nil
}

// Session is the session command: detached sessions that later commands
// run in.
func Session(a *App) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "session",
		Short: "Create, list, inspect and remove live sessions that commands run in",
		Long: `A session is a sandbox that stays up between commands: its files, its
processes and its limits stay, and each command run in it
('agentbox exec --session ID -- CMD') costs about a process start instead of
building a sandbox. 'agentbox session create' takes the same sandbox flags as
exec and prints the new session's id; the session lives until
'agentbox session rm ID' (or the host restarts). 'agentbox gc' removes what
is left of sessions that died.`,
		Example: `  id=$(agentbox session create --workspace ./project --memory 1G --timeout 60s)
  agentbox exec --session "$id" -- make test
  agentbox exec --session "$id" --tty -- bash
  agentbox session pause "$id"; agentbox session unpause "$id"
  id=$(agentbox session create --port 8000); agentbox session forward "$id" 8000
  agentbox session watch "$id" src
  fork=$(agentbox session fork "$id")
  id=$(agentbox session create --idle-timeout 10m); agentbox session extend "$id"
  agentbox session ls
  agentbox session rm "$id"`,
	}
	cmd.AddCommand(a.sessionCreate(), a.sessionLs(), a.sessionRm(), a.sessionState(), a.sessionPause(true), a.sessionPause(false), a.sessionWatch(), a.sessionExtend(), a.sessionFork(), a.sessionHibernate(), a.sessionForward())
	return cmd
}

func (a *App) sessionCreate() *cobra.Command {
	var (
		sf      sandboxFlags
		timeout time.Duration
		idle    time.Duration
		asJSON  bool
		ports   []int
	)
	cmd := &cobra.Command{
		Use:   "create [flags]",
		Short: "Create a session and print its id",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := a.needsFull(sf.backend); err != nil {
				return err
			}
			spec, err := sf.exec.buildSpec()
			if err != nil {
				return Fail(fmt.Errorf("session create: %w", err))
			}
			if timeout < 0 {
				return Failf("session create: --timeout %s: must be positive (0 means no limit)", timeout)
			}
			spec.Policy.Resources.ExecTimeout = timeout
			spec.Ports = ports
			if idle < 0 {
				return Failf("session create: --idle-timeout %s: must be positive (0 means none)", idle)
			}
			spec.Policy.Resources.IdleTimeout = idle
			if err := sf.checkRemote(cmd.Flags()); err != nil {
				return err
			}
			if spec.Policy.Network.EffectiveMode() == sandbox.NetworkAllowList && sf.backend != "remote" {
				// The egress proxy runs in the process that makes the
				// session, and this one exits: a session's commands would
				// find no way out, which is not the allow-list asked for.
				return Failf("session create: --network %s: a detached session has no egress proxy (it runs in the process that created the session, which exits now); use agentbox exec --network for commands that need the network", sf.exec.network)
			}
			if sf.workspace.saveSnapshot {
				return Failf("session create: --save-snapshot saves at the end of an exec; for a session, use agentbox snapshot save on its workspace")
			}
			ctx, release := interruptible(cmd.Context())
			defer release()
			pw, err := sf.workspace.prepare(ctx, &spec, sf.exec.user != "")
			if err != nil {
				return Fail(fmt.Errorf("session create: %w", err))
			}
			client, err := a.OpenBackend(sf.backend, sf.backendOptions(pw))
			if err != nil {
				pw.cleanup()
				return Fail(err)
			}
			spec.Detached = true // it lives until agentbox session rm, not this command
			sess, err := client.Create(ctx, spec)
			if err != nil {
				pw.cleanup()
				return Fail(fmt.Errorf("session create: %w", err))
			}
			e := sessionEntry{State: sess.State(), TempWorkspace: pw.temp}
			if sf.backend == "kube" {
				k := sf.kube
				if k.Kubeconfig != "" {
					if k.Kubeconfig, err = filepath.Abs(k.Kubeconfig); err != nil {
						_ = sess.Close(context.WithoutCancel(ctx))
						pw.cleanup()
						return Fail(fmt.Errorf("session create: --kubeconfig: %w", err))
					}
				}
				e.Kube = &k
			}
			if err := saveSession(e); err != nil {
				_ = sess.Close(context.WithoutCancel(ctx))
				pw.cleanup()
				return Fail(fmt.Errorf("session create: %w", err))
			}
			if pw.keep != nil {
				pw.keep() // session rm removes it
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), e.State)
			}
			fmt.Fprintln(cmd.OutOrStdout(), sess.ID())
			return nil
		},
	}
	fl := cmd.Flags()
	sf.register(fl)
	fl.DurationVar(&timeout, "timeout", 0, "wall-clock limit of each command run in the session (`DURATION`; a command may ask for less, never more)")
	fl.DurationVar(&idle, "idle-timeout", 0, "end the session once no command has run in it, nor 'session extend' been asked, for `DURATION` (paused time does not count)")
	fl.BoolVar(&asJSON, "json", false, "print the session's state (JSON) instead of its id")
	fl.IntSliceVar(&ports, "port", nil, "expose `PORT` on the sandbox's loopback to the host through 'session forward' (repeatable)")
	return cmd
}

func (a *App) sessionLs() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the sessions made by session create, and whether each still runs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			list, err := listSessions()
			if err != nil {
				return Fail(err)
			}
			// A session of a backend only agentbox-full links (remote,
			// docker) has its status said there.
			for _, e := range list {
				if err := a.needsFull(e.State.Backend); err != nil {
					return err
				}
			}
			type row struct {
				ID        string    `json:"id"`
				Backend   string    `json:"backend"`
				Status    string    `json:"status"`
				Workspace string    `json:"workspace"`
				Created   time.Time `json:"created_at"`
			}
			rows := []row{}
			for _, e := range list {
				rows = append(rows, row{e.State.ID, e.State.Backend, a.status(e), e.State.Workspace, e.State.CreatedAt})
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), rows)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tBACKEND\tSTATUS\tCREATED\tWORKSPACE")
			for _, r := range rows {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.ID, r.Backend, r.Status, r.Created.Local().Format(time.DateTime), r.Workspace)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array")
	return cmd
}

func (a *App) sessionRm() *cobra.Command {
	return &cobra.Command{
		Use:   "rm ID...",
		Short: "End sessions and remove what they hold (their workspace, when they made it)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, ids []string) error {
			var errs []error
			for _, id := range ids {
				e, err := loadSession(id)
				if err == nil {
					if err = a.needsFull(e.State.Backend); err == nil {
						err = a.removeSession(cmd.Context(), e)
					}
				}
				if err != nil {
					errs = append(errs, err)
					continue
				}
				fmt.Fprintln(cmd.OutOrStdout(), id)
			}
			if len(errs) > 0 {
				return Fail(fmt.Errorf("session rm: %w", errors.Join(errs...)))
			}
			return nil
		},
	}
}

func (a *App) sessionState() *cobra.Command {
	return &cobra.Command{
		Use:   "state ID",
		Short: "Print a session's state (JSON), as the Go API's Client.Resume takes it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, err := loadSession(args[0])
			if err != nil {
				return Fail(err)
			}
			b, err := sandbox.MarshalState(e.State)
			if err != nil {
				return Fail(err)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\n", b)
			return err
		},
	}
}

// writeJSON writes v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
