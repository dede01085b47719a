package snapshot

import (
	"archive/tar"
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/agentbox/agentbox/sandbox"
)

// PAX records agentbox adds to an exported tar. Other tools ignore them;
// Import uses them to rebuild the same manifest (and so the same ID) and to
// check each file's content.
const (
	paxHeader = "AGENTBOX.snapshot" // global: the manifest header as JSON
	paxSHA256 = "AGENTBOX.sha256"   // per file: the content's sha256
	paxHoles  = "AGENTBOX.holes"    // per sparse file: its holes, "OFF+LEN,..."
)

// Export writes snapshot ref to w as a PAX tar: a global header carrying
// the snapshot's header, then the root ("./"), directories, files and
// symlinks in manifest order with their modes and nanosecond mtimes. Every
// object is verified while written; on a mismatch Export fails (the tar is
// then incomplete and Import refuses it).
func (s *Store) Export(ctx context.Context, ref string, w io.Writer) error {
	unlock, err := s.lock(ctx, false)
	if err != nil {
		return sandbox.Wrap("snapshot: export "+ref, nil, err)
	}
	defer unlock()
	id, m, err := s.load(ref)
	if err != nil {
		return err
	}
	op := "snapshot: export " + short(id)
	hdrJSON, err := json.Marshal(m.Header)
	if err != nil {
		return sandbox.Wrap(op, nil, err)
	}
	tw := tar.NewWriter(w)
	if err := tw.WriteHeader(&tar.Header{
		Typeflag:   tar.TypeXGlobalHeader,
		Name:       "pax_global_header",
		PAXRecords: map[string]string{paxHeader: string(hdrJSON)},
		Format:     tar.FormatPAX,
	}); err != nil {
		return sandbox.Wrap(op, nil, err)
	}
	wk := newWorker()
	defer wk.close()
	for _, e := range m.Entries {
		if err := ctx.Err(); err != nil {
			return sandbox.Wrap(op, nil, err)
		}
		h := &tar.Header{
			Name:    e.Path,
			Mode:    int64(e.Mode),
			ModTime: e.MTime,
			Format:  tar.FormatPAX,
		}
		switch e.Type {
		case TypeDir:
			h.Typeflag = tar.TypeDir
			h.Name += "/"
			if e.Path == "." {
				h.Name = "./"
			}
		case TypeFile:
			h.Typeflag = tar.TypeReg
			h.Size = e.Size
			h.PAXRecords = map[string]string{paxSHA256: e.SHA256}
			if len(e.Holes) > 0 {
				h.PAXRecords[paxHoles] = formatHoles(e.Holes)
			}
		case TypeSymlink:
			h.Typeflag = tar.TypeSymlink
			h.Linkname = e.Target
		}
		if err := tw.WriteHeader(h); err != nil {
			return sandbox.Wrap(op, nil, fmt.Errorf("write header of %s: %w", e.Path, err))
		}
		if e.Type == TypeFile && e.Size > 0 {
			if err := s.readObject(wk, e.SHA256, e.Size, tw); err != nil {
				return failure(id, op, fmt.Errorf("export %s: %w", e.Path, err))
			}
		}
	}
	if err := tw.Close(); err != nil {
		return sandbox.Wrap(op, nil, err)
	}
	return nil
}
