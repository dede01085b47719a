package artifact

import (
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/sandbox"
)

// tail is the last few hundred bytes of a command's output, for messages.
func tail(outs ...[]byte) string {
	for _, o := range outs {
		s := strings.TrimSpace(string(o))
		if s == "" {
			continue
		}
		if len(s) > 300 {
			s = "…" + s[len(s)-300:]
		}
		return s
	}
	return "(no output)"
}

func hashFile(p string, h hash.Hash) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	return hashReader(f, h)
}

func hashReader(r io.Reader, h hash.Hash) (string, error) {
	if _, err := io.Copy(h, r); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func writeSynced(p string, data []byte) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// commit moves the staged tree into dest. A missing dest is created by
// one rename of the whole staging dir. An existing dest gets each file
// renamed in, the record last, after checking that nothing would be
// overwritten; a rename failing half-way takes back what was moved.
func commit(staging, dest string, cands []*candidate) error {
	if err := syncDir(staging); err != nil {
		return err
	}
	if err := os.Chmod(staging, 0o755); err != nil {
		return err
	}
	if _, err := os.Lstat(dest); os.IsNotExist(err) {
		if err := os.Rename(staging, dest); err != nil {
			return fmt.Errorf("artifact: move staged outputs to %s: %w", dest, err)
		}
		return syncDir(filepath.Dir(dest))
	}
	// Every path below dest is resolved through an os.Root of it, so a
	// symlink someone else planted there (dest/out -> /etc) is not
	// followed out of dest.
	if filepath.Dir(staging) != dest {
		return sandbox.Errorf(sandbox.ErrInvalid, "artifact: destination %s appeared while promoting; nothing promoted", dest)
	}
	root, err := os.OpenRoot(dest)
	if err != nil {
		return fmt.Errorf("artifact: open destination %s: %w", dest, err)
	}
	defer root.Close()
	stageRel := filepath.Base(staging)
	names := make([]string, 0, len(cands)+1)
	for _, c := range cands {
		names = append(names, filepath.FromSlash(c.entry.Path))
	}
	names = append(names, RecordName)
	var clash []string
	for _, n := range names {
		_, err := root.Lstat(n)
		switch {
		case err == nil:
			clash = append(clash, n)
		case !errors.Is(err, fs.ErrNotExist):
			return sandbox.Wrap("artifact: check "+filepath.Join(dest, n), sandbox.ErrPathEscape, err)
		}
	}
	if len(clash) > 0 {
		return sandbox.Errorf(sandbox.ErrInvalid, "artifact: destination %s already has %s; nothing promoted (choose a new or empty destination)", dest, strings.Join(clash, ", "))
	}
	var moved []string
	var made []string
	undo := func() {
		for i := len(moved) - 1; i >= 0; i-- {
			_ = root.Rename(moved[i], filepath.Join(stageRel, moved[i]))
		}
		// Deepest first, so that each is empty when its turn comes.
		slices.SortStableFunc(made, func(a, b string) int {
			return strings.Count(b, string(filepath.Separator)) - strings.Count(a, string(filepath.Separator))
		})
		for _, d := range made {
			_ = root.Remove(d)
		}
	}
	for _, n := range names {
		for d := filepath.Dir(n); d != "."; d = filepath.Dir(d) {
			if _, err := root.Lstat(d); errors.Is(err, fs.ErrNotExist) {
				made = append(made, d)
			}
		}
		if err := root.MkdirAll(filepath.Dir(n), 0o755); err != nil {
			undo()
			return fmt.Errorf("artifact: create %s in %s: %w", filepath.Dir(n), dest, err)
		}
		if err := root.Rename(filepath.Join(stageRel, n), n); err != nil {
			undo()
			return fmt.Errorf("artifact: move %s into %s: %w", n, dest, err)
		}
		moved = append(moved, n)
	}
	_ = os.RemoveAll(staging)
	return syncDir(dest)
}

func syncDir(d string) error {
	f, err := os.Open(d)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("artifact: sync %s: %w", d, err)
	}
	return nil
}
