package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/agentbox/agentbox/snapshot"
)

// snapshotFlags are the flags every snapshot subcommand shares.
type snapshotFlags struct {
	store    string
	asJSON   bool
	progress bool
}

// Snapshot is the snapshot command.
func Snapshot(a *App) *cobra.Command {
	f := &snapshotFlags{}
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "List, inspect, save, restore, export and delete workspace snapshots",
		Long: `A snapshot is a workspace saved as content (files, directories, symlinks,
modes and times; not mounts) in a content-addressed store, so unchanged
files are stored once. IDs may be shortened to any unique prefix.`,
	}
	cmd.PersistentFlags().StringVar(&f.store, "store", snapshot.DefaultDir(), "snapshot store directory")
	cmd.AddCommand(
		newSnapshotLsCmd(f), newSnapshotShowCmd(f), newSnapshotRmCmd(f),
		newSnapshotSaveCmd(f), newSnapshotRestoreCmd(f), newSnapshotVerifyCmd(f),
		newSnapshotExportCmd(f), newSnapshotImportCmd(f), newSnapshotGCCmd(f),
	)
	return cmd
}

// open opens the store; any failure is agentbox's (exit 125).
func (f *snapshotFlags) open() (*snapshot.Store, error) {
	// Warnings (files left out of a save, stale staging) go to stderr.
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s, err := snapshot.Open(f.store, snapshot.Options{Logger: logger})
	if err != nil {
		return nil, Fail(err)
	}
	return s, nil
}

// snapshotFail turns an error into agentbox's exit status.
func snapshotFail(err error) error {
	if err == nil {
		return nil
	}
	return Fail(err)
}

func newSnapshotLsCmd(f *snapshotFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the snapshots in the store, oldest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := f.open()
			if err != nil {
				return err
			}
			list, err := s.List(cmd.Context())
			if err != nil {
				return snapshotFail(err)
			}
			out := cmd.OutOrStdout()
			if f.asJSON {
				if list == nil {
					list = []snapshot.Info{}
				}
				return snapshotFail(snapWriteJSON(out, list))
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tCREATED\tFILES\tSIZE\tPARENT\tLABELS")
			for _, in := range list {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", snapShortID(in.ID), in.Created.Local().Format(time.DateTime),
					in.Total.Files, snapHumanBytes(in.Total.Bytes), snapShortID(in.Parent), snapFormatLabels(in.Labels))
			}
			return snapshotFail(tw.Flush())
		},
	}
	cmd.Flags().BoolVar(&f.asJSON, "json", false, "print JSON")
	return cmd
}

func newSnapshotShowCmd(f *snapshotFlags) *cobra.Command {
	var entries bool
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Describe one snapshot (with --entries, every file in it)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := f.open()
			if err != nil {
				return err
			}
			id, m, err := s.Manifest(cmd.Context(), args[0])
			if err != nil {
				return snapshotFail(err)
			}
			out := cmd.OutOrStdout()
			if f.asJSON {
				v := any(snapshot.Info{ID: id, Header: m.Header})
				if entries {
					v = struct {
						ID string `json:"id"`
						*snapshot.Manifest
					}{id, m}
				}
				return snapshotFail(snapWriteJSON(out, v))
			}
			fmt.Fprintf(out, "ID:       %s\nCreated:  %s\n", id, m.Created.Local().Format(time.RFC3339))
			if m.Parent != "" {
				fmt.Fprintf(out, "Parent:   %s\n", m.Parent)
			}
			fmt.Fprintf(out, "Content:  %d files, %d directories, %d symlinks, %s\n",
				m.Total.Files, m.Total.Dirs, m.Total.Symlinks, snapHumanBytes(m.Total.Bytes))
			if len(m.Labels) > 0 {
				fmt.Fprintf(out, "Labels:   %s\n", snapFormatLabels(m.Labels))
			}
			for _, sk := range m.Skipped {
				fmt.Fprintf(out, "Skipped:  %s (%s)\n", sk.Path, sk.Reason)
			}
			if entries {
				tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "\nMODE\tSIZE\tMTIME\tPATH")
				for _, e := range m.Entries {
					name := e.Path
					switch e.Type {
					case snapshot.TypeDir:
						name += "/"
					case snapshot.TypeSymlink:
						name += " -> " + e.Target
					}
					fmt.Fprintf(tw, "%s%04o\t%d\t%s\t%s\n", string(e.Type[0]), e.Mode, e.Size, e.MTime.Local().Format(time.DateTime), name)
				}
				return snapshotFail(tw.Flush())
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&f.asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&entries, "entries", false, "list every entry")
	return cmd
}

func newSnapshotRmCmd(f *snapshotFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "rm ID...",
		Short: "Delete snapshots and the contents no other snapshot uses",
		Args:  cobra.MinimumNArgs(1),
		RunE:  f.eachRef("deleted", (*snapshot.Store).Delete),
	}
}

// eachRef is the RunE of a command that applies op to every snapshot ID
// given, saying done and the ID after each, and stopping at the first
// failure.
func (f *snapshotFlags) eachRef(done string, op func(*snapshot.Store, context.Context, string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		s, err := f.open()
		if err != nil {
			return err
		}
		for _, ref := range args {
			if err := op(s, cmd.Context(), ref); err != nil {
				return snapshotFail(err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), done, ref)
		}
		return nil
	}
}

func newSnapshotSaveCmd(f *snapshotFlags) *cobra.Command {
	var (
		exclude []string
		labels  []string
		parent  string
	)
	cmd := &cobra.Command{
		Use:   "save DIR",
		Short: "Save a directory as a new snapshot and print its ID",
		Long: `Save DIR as a new snapshot and print its ID on stdout. Symlinks are kept
when they stay inside DIR; special files and escaping symlinks are left out
with a warning. --exclude leaves out a DIR-relative path (a mount point)
with everything below it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := f.open()
			if err != nil {
				return err
			}
			lbl, err := snapParseLabels(labels)
			if err != nil {
				return Fail(err)
			}
			bar := f.bar(cmd.ErrOrStderr(), "saving")
			info, err := s.SaveWithOptions(cmd.Context(), args[0], snapshot.SaveOptions{
				Exclude: exclude, Parent: parent, Labels: lbl, Progress: bar.update,
			})
			bar.done()
			if err != nil {
				return snapshotFail(err)
			}
			if f.asJSON {
				return snapshotFail(snapWriteJSON(cmd.OutOrStdout(), info))
			}
			fmt.Fprintln(cmd.OutOrStdout(), info.ID)
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&exclude, "exclude", nil, "DIR-relative path to leave out (repeatable)")
	cmd.Flags().StringArrayVar(&labels, "label", nil, "KEY=VALUE tag to keep with the snapshot (repeatable)")
	cmd.Flags().StringVar(&parent, "parent", "", "snapshot this one follows (recorded)")
	cmd.Flags().BoolVar(&f.progress, "progress", false, "show a progress bar even when stderr is not a terminal")
	cmd.Flags().BoolVar(&f.asJSON, "json", false, "print the new snapshot's description as JSON")
	return cmd
}

func newSnapshotRestoreCmd(f *snapshotFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "restore ID DIR",
		Short: "Restore a snapshot into an empty or absent directory",
		Long: `Restore snapshot ID into DIR, which must be empty or absent. Every file is
checked against its sha256 before the tree appears at DIR: a corrupted
snapshot restores nothing.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := f.open()
			if err != nil {
				return err
			}
			bar := f.bar(cmd.ErrOrStderr(), "restoring")
			err = s.RestoreWithOptions(cmd.Context(), args[0], args[1], snapshot.RestoreOptions{Progress: bar.update})
			bar.done()
			return snapshotFail(err)
		},
	}
	cmd.Flags().BoolVar(&f.progress, "progress", false, "show a progress bar even when stderr is not a terminal")
	return cmd
}

func newSnapshotVerifyCmd(f *snapshotFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "verify ID...",
		Short: "Check that snapshots are whole (every content's sha256)",
		Args:  cobra.MinimumNArgs(1),
		RunE:  f.eachRef("ok", (*snapshot.Store).Verify),
	}
}

func newSnapshotExportCmd(f *snapshotFlags) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "export ID",
		Short: "Write a snapshot as a tar archive (to stdout or -o FILE)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := f.open()
			if err != nil {
				return err
			}
			if output == "" || output == "-" {
				return snapshotFail(s.Export(cmd.Context(), args[0], cmd.OutOrStdout()))
			}
			tmp := output + ".partial"
			out, err := os.Create(tmp)
			if err != nil {
				return snapshotFail(err)
			}
			err = s.Export(cmd.Context(), args[0], out)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err == nil {
				err = os.Rename(tmp, output)
			}
			if err != nil {
				os.Remove(tmp)
			}
			return snapshotFail(err)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "write the archive to this file (default stdout)")
	return cmd
}

func newSnapshotImportCmd(f *snapshotFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "import FILE",
		Short: "Import a tar archive (plain, gzip or zstd; - for stdin) as a snapshot",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := f.open()
			if err != nil {
				return err
			}
			var in io.Reader = cmd.InOrStdin()
			if args[0] != "-" {
				file, err := os.Open(args[0])
				if err != nil {
					return snapshotFail(err)
				}
				defer file.Close()
				in = file
			}
			info, err := s.Import(cmd.Context(), in)
			if err != nil {
				return snapshotFail(err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), info.ID)
			return nil
		},
	}
}

func newSnapshotGCCmd(f *snapshotFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "gc",
		Short: "Remove contents no snapshot references and leftovers of interrupted saves",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := f.open()
			if err != nil {
				return err
			}
			n, err := s.GC(cmd.Context())
			if err != nil {
				return snapshotFail(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed %d unreferenced objects\n", n)
			return nil
		},
	}
}

// snapshotBar is a progress bar on stderr, or nothing when stderr is not a
// terminal and --progress was not given.
type snapshotBar struct{ bar *progressbar.ProgressBar }

func (f *snapshotFlags) bar(w io.Writer, what string) *snapshotBar {
	file, ok := w.(*os.File)
	if !f.progress && !(ok && term.IsTerminal(int(file.Fd()))) {
		return &snapshotBar{}
	}
	return &snapshotBar{bar: progressbar.NewOptions64(-1,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(what),
		progressbar.OptionShowBytes(true),
		progressbar.OptionShowTotalBytes(true),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }),
	)}
}

// update is a snapshot Progress callback; nil when there is no bar.
func (b *snapshotBar) update(done, total int64) {
	if b.bar == nil {
		return
	}
	if b.bar.GetMax64() != total {
		b.bar.ChangeMax64(total)
	}
	_ = b.bar.Set64(done)
}

func (b *snapshotBar) done() {
	if b.bar != nil && !b.bar.IsFinished() {
		_ = b.bar.Exit()
	}
}

func snapWriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func snapShortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

func snapFormatLabels(l map[string]string) string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + l[k]
	}
	return strings.Join(parts, ",")
}

func snapParseLabels(list []string) (map[string]string, error) {
	if len(list) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(list))
	for _, kv := range list {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("label %q is not KEY=VALUE", kv)
		}
		out[k] = v
	}
	return out, nil
}

// snapHumanBytes prints a size in IEC units (1.5 GiB).
func snapHumanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
