package agent

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/agentbox/agentbox/sandbox"
)

// copyTree copies the files and directories under dir into sess's
// workspace at the same relative paths, through the session's own file
// calls: how a manifest reaches a session whose workspace is not on this
// host. dir is the scratch directory the runner materialized the manifest
// into; anything else in it (a link a local_dir carried, a special file)
// is refused, naming it. Each file is read whole, one WriteFile each.
func copyTree(ctx context.Context, sess sandbox.Session, dir string) error {
	var dirs []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch {
		case d.IsDir():
			dirs = append(dirs, rel)
			return nil
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if err := sess.WriteFile(ctx, rel, data, info.Mode().Perm()); err != nil {
				return fmt.Errorf("write %s: %w", rel, err)
			}
			return nil
		}
		return fmt.Errorf("%s: a %s cannot be copied into the session (only files and directories)", rel, d.Type())
	})
	if err != nil || len(dirs) == 0 {
		return err
	}
	// Directories that hold no file (an output/ for the agent to fill)
	// are made by the session's own mkdir.
	res, err := sandbox.Exec(ctx, sess, sandbox.ExecRequest{Cmd: append([]string{"mkdir", "-p", "--"}, dirs...)})
	if err != nil {
		return fmt.Errorf("make directories: %w", err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("make directories: mkdir exit %d: %s", res.ExitCode, bytes.TrimSpace(res.Stderr))
	}
	return nil
}
