package snapshot

import (
	"context"
	"io"

	"github.com/agentbox/agentbox/sandbox"
)

// Verify checks that snapshot ref is whole: its manifest hashes to its ID
// and is valid, and every object it references exists, decompresses, and
// has the size and sha256 the manifest says. A failure carries ErrCorrupt
// (and sandbox.ErrInvalid) and names the broken piece.
func (s *Store) Verify(ctx context.Context, ref string) error {
	unlock, err := s.lock(ctx, false)
	if err != nil {
		return sandbox.Wrap("snapshot: verify "+ref, nil, err)
	}
	defer unlock()
	id, m, err := s.load(ref)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	var objs []Entry
	for _, e := range m.Entries {
		if e.Type == TypeFile && e.Size > 0 && !seen[e.SHA256] {
			seen[e.SHA256] = true
			objs = append(objs, e)
		}
	}
	err = forEach(ctx, len(objs), func(w *worker, i int) error {
		return s.readObject(w, objs[i].SHA256, objs[i].Size, io.Discard)
	})
	return failure(id, "snapshot: verify "+short(id), err)
}
