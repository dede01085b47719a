package snapshot

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentbox/agentbox/sandbox"
)

// Delete removes a snapshot and then every object no remaining snapshot
// references. It waits for saves and restores in progress (they hold the
// store lock shared), so an object a concurrent save relies on is never
// collected.
func (s *Store) Delete(ctx context.Context, ref string) error {
	unlock, err := s.lock(ctx, true)
	if err != nil {
		return sandbox.Wrap("snapshot: delete "+ref, nil, err)
	}
	defer unlock()
	id, err := s.resolve(ref)
	if err != nil {
		return err
	}
	if err := os.Remove(s.manifestPath(id)); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return s.notFound(ref)
		}
		return sandbox.Wrap("snapshot: delete "+short(id), nil, err)
	}
	if err := syncDir(s.snapshotsDir()); err != nil {
		return sandbox.Wrap("snapshot: delete "+short(id), nil, err)
	}
	if _, err := s.collect(ctx); err != nil {
		return sandbox.Wrap("snapshot: delete "+short(id)+": collect unreferenced objects", nil, err)
	}
	return nil
}

// GC removes unreferenced objects and stale staging directories, and
// reports how many objects it removed.
func (s *Store) GC(ctx context.Context) (int, error) {
	unlock, err := s.lock(ctx, true)
	if err != nil {
		return 0, sandbox.Wrap("snapshot: gc", nil, err)
	}
	defer unlock()
	s.cleanStaging()
	n, err := s.collect(ctx)
	return n, sandbox.Wrap("snapshot: gc", nil, err)
}

// collect deletes objects that no manifest references; the caller holds
// the store lock exclusively. A manifest that cannot be read stops the
// collection: its objects must not be lost because of a read error.
func (s *Store) collect(ctx context.Context) (int, error) {
	ids, err := s.ids()
	if err != nil {
		return 0, err
	}
	live := make(map[string]bool)
	for _, id := range ids {
		data, err := os.ReadFile(s.manifestPath(id))
		if err != nil {
			return 0, fmt.Errorf("read manifest %s: %w", short(id), err)
		}
		m, err := decodeManifest(data, id, s.limits)
		if err != nil {
			return 0, fmt.Errorf("manifest %s: %w (not collecting anything)", short(id), err)
		}
		for _, e := range m.Entries {
			if e.Type == TypeFile && e.Size > 0 {
				live[e.SHA256] = true
			}
		}
	}
	removed, err := s.collectPacks(live)
	if err != nil {
		return removed, err
	}
	fans, err := os.ReadDir(s.objectsDir())
	if err != nil {
		return 0, err
	}
	for _, fan := range fans {
		if err := ctx.Err(); err != nil {
			return removed, err
		}
		dir := filepath.Join(s.objectsDir(), fan.Name())
		objs, err := os.ReadDir(dir)
		if err != nil {
			return removed, err
		}
		for _, o := range objs {
			if live[fan.Name()+o.Name()] {
				continue
			}
			if err := os.Remove(filepath.Join(dir, o.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
				return removed, err
			}
			removed++
		}
	}
	return removed, nil
}
