package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/sandbox"
)

// SaveOptions tune a save.
type SaveOptions struct {
	// Exclude lists root-relative paths (mount points) left out with
	// their subtrees.
	Exclude []string
	// Parent, when set, is recorded as the snapshot this one follows; it
	// must exist in the store.
	Parent string
	// Progress, when set, is called with content bytes done and the total.
	Progress func(done, total int64)
	// Labels are free-form tags kept in the manifest.
	Labels map[string]string
	// MaxBytes, when positive, bounds the sum of the file sizes (holes
	// included): a session's disk limit, so that a snapshot holds no more
	// than its workspace may.
	MaxBytes int64
}

// Save stores the tree at dir, minus the relative paths in exclude, and
// returns the new snapshot's ID; maxBytes is SaveOptions.MaxBytes. It
// implements sandbox.SnapshotStore.
func (s *Store) Save(ctx context.Context, dir string, exclude []string, maxBytes int64) (string, error) {
	info, err := s.SaveWithOptions(ctx, dir, SaveOptions{Exclude: exclude, MaxBytes: maxBytes})
	return info.ID, err
}

// SaveWithOptions stores the tree at dir and describes the new snapshot.
// Symlinks are stored, never followed, and only when they stay inside the
// tree; special files (devices, fifos, sockets) and escaping symlinks are
// left out, logged as warnings and listed in Info.Skipped. Hard links are
// stored as separate files. Contents already in the store are not stored
// again. Nothing is visible in the store until the whole snapshot is
// durable (see the package documentation).
func (s *Store) SaveWithOptions(ctx context.Context, dir string, opts SaveOptions) (Info, error) {
	op := "snapshot: save " + dir
	excl, err := cleanExcludes(opts.Exclude)
	if err != nil {
		return Info{}, sandbox.Wrap(op, sandbox.ErrInvalid, err)
	}
	unlock, err := s.lock(ctx, false)
	if err != nil {
		return Info{}, sandbox.Wrap(op, nil, err)
	}
	defer unlock()
	m := &Manifest{Header: Header{Version: FormatVersion, Created: time.Now().UTC(), Labels: maps.Clone(opts.Labels)}}
	if opts.Parent != "" {
		if m.Parent, err = s.resolve(opts.Parent); err != nil {
			return Info{}, err
		}
	}
	entries, skipped, err := walkTree(dir, excl, s.limits)
	if err != nil {
		return Info{}, sandbox.Wrap(op, nil, err)
	}
	src, err := openSource(dir)
	if err != nil {
		return Info{}, sandbox.Wrap(op, nil, err)
	}
	defer src.close()
	st, err := s.newStager("save")
	if err != nil {
		return Info{}, sandbox.Wrap(op, nil, err)
	}
	defer st.abort()

	var files []int
	var total int64
	for i, e := range entries {
		if e.Type == TypeFile {
			files = append(files, i)
			total += e.Size
		}
	}
	if err := checkBound("its files", total, opts.MaxBytes); err != nil {
		return Info{}, sandbox.Wrap(op, sandbox.ErrInvalid, err)
	}
	prog := newProgress(opts.Progress, total)
	gone := make([]string, len(entries)) // why an entry was dropped while reading
	err = forEach(ctx, len(files), func(w *worker, k int) error {
		e := &entries[files[k]]
		reason, err := s.saveFile(w, st, src, e)
		if err != nil {
			return fmt.Errorf("store %s: %w", e.Path, err)
		}
		gone[files[k]] = reason
		prog.add(e.Size)
		return nil
	})
	if err != nil {
		return Info{}, sandbox.Wrap(op, nil, err)
	}
	prog.finish()

	kept := entries[:0]
	for i, e := range entries {
		if gone[i] != "" {
			skipped = append(skipped, Skipped{Path: e.Path, Reason: gone[i]})
			continue
		}
		kept = append(kept, e)
	}
	m.Entries = kept
	m.Skipped = skipped
	for _, sk := range skipped {
		s.log.Warn("snapshot: left out of the snapshot", "path", sk.Path, "reason", sk.Reason)
	}
	m.computeTotals()
	m.setVersion()
	if err := checkBound("its files", m.Total.Bytes, opts.MaxBytes); err != nil { // they grew while read
		return Info{}, sandbox.Wrap(op, sandbox.ErrInvalid, err)
	}
	if err := m.validate(s.limits); err != nil {
		return Info{}, sandbox.Wrap(op, sandbox.ErrInvalid, err)
	}
	info, err := st.publish(m)
	if err != nil {
		return Info{}, sandbox.Wrap(op, nil, err)
	}
	return info, nil
}

// saveFile stores one file's content and fills e from the open file (the
// tree may change between the walk and the read; what was read is what is
// recorded). It returns a reason when the entry must be dropped instead.
func (s *Store) saveFile(w *worker, st *stager, src *source, e *Entry) (string, error) {
	f, err := src.open(e.Path)
	switch {
	case errors.Is(err, errChanged):
		return errChanged.Error(), nil
	case errors.Is(err, os.ErrNotExist):
		return "removed while saving", nil
	case err != nil:
		return "", err
	}
	defer f.Close()
	var fst unix.Stat_t
	if err := unix.Fstat(f.fd, &fst); err != nil {
		return "", err
	}
	if fst.Mode&unix.S_IFMT != unix.S_IFREG {
		return "no longer a regular file when read", nil
	}
	var r io.Reader = f
	var sparse *sparseReader
	if fst.Blocks*512 < fst.Size { // fewer blocks than bytes: it may have holes
		sparse = newSparseReader(f, fst.Size, &st.holeBudget)
		r = sparse
	}
	sum, size, err := st.put(w, r)
	if err != nil {
		return "", err
	}
	e.SHA256, e.Size, e.Holes = sum, size, nil
	if sparse != nil {
		e.Holes = sparse.holes
	}
	e.Mode = fst.Mode & 0o7777
	e.MTime = statTime(fst.Mtim)
	return "", nil
}

// cleanExcludes turns exclude paths into clean root-relative paths.
func cleanExcludes(list []string) (map[string]bool, error) {
	out := make(map[string]bool, len(list))
	for _, p := range list {
		c := path.Clean(filepath.ToSlash(p))
		switch {
		case p == "" || c == ".":
			return nil, fmt.Errorf("exclude %q would leave out the whole tree", p)
		case path.IsAbs(c):
			return nil, fmt.Errorf("exclude %q must be relative to the tree", p)
		case c == ".." || strings.HasPrefix(c, "../"):
			return nil, fmt.Errorf("exclude %q leaves the tree", p)
		}
		out[c] = true
	}
	return out, nil
}
