package artifact

import (
	"encoding/hex"
	"fmt"
	"hash"
	"io"
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
	names := make([]string, 0, len(cands)+1)
	for _, c := range cands {
		names = append(names, filepath.FromSlash(c.entry.Path))
	}
	names = append(names, RecordName)
	var clash []string
	for _, n := range names {
		if _, err := os.Lstat(filepath.Join(dest, n)); err == nil {
			clash = append(clash, n)
		}
	}
	if len(clash) > 0 {
		return sandbox.Errorf(sandbox.ErrInvalid, "artifact: destination %s already has %s; nothing promoted (choose a new or empty destination)", dest, strings.Join(clash, ", "))
	}
	var moved []string
	var made []string
	undo := func() {
		for i := len(moved) - 1; i >= 0; i-- {
			_ = os.Rename(filepath.Join(dest, moved[i]), filepath.Join(staging, moved[i]))
		}
		slices.Reverse(made)
		for _, d := range made {
			_ = os.Remove(d)
		}
	}
	for _, n := range names {
		target := filepath.Join(dest, n)
		for d := filepath.Dir(target); d != dest; d = filepath.Dir(d) {
			if _, err := os.Lstat(d); os.IsNotExist(err) {
				made = append(made, d)
			}
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			undo()
			return fmt.Errorf("artifact: create %s: %w", filepath.Dir(target), err)
		}
		if err := os.Rename(filepath.Join(staging, n), target); err != nil {
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
