package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/datadir"
	"github.com/agentbox/agentbox/sandbox"
)

// Options configure a Store.
type Options struct {
	// Logger receives warnings (skipped files, stale staging removed);
	// default slog.Default().
	Logger *slog.Logger
	// Limits bound restored and imported snapshots; zero fields take
	// DefaultLimits.
	Limits Limits
}

// Store is a snapshot store in a directory. It is safe for concurrent use,
// also by several processes: saves, restores and verifications share the
// store's lock, deletions take it exclusively.
type Store struct {
	dir    string
	log    *slog.Logger
	limits Limits
	// noSync skips syncfs/fsync; only tests that do not test durability
	// (the fuzzer) set it, to run faster.
	noSync bool

	packMu   sync.RWMutex
	packed   map[string]packLoc  // sha256 -> where it sits in a pack
	packSums map[string][]string // pack name -> its objects
}

var _ sandbox.SnapshotStore = (*Store)(nil)

// DefaultDir is the store used when none is named (see datadir.Snapshots):
// $AGENTBOX_HOME/snapshots, else /var/lib/agentbox/snapshots for root,
// else $XDG_DATA_HOME/agentbox/snapshots or ~/.local/share/agentbox/snapshots.
func DefaultDir() string { return datadir.Snapshots() }

// Open opens (creating if needed) the store in dir and removes the staging
// directories of saves that were interrupted.
func Open(dir string, opts Options) (*Store, error) {
	if dir == "" {
		dir = DefaultDir()
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, sandbox.Wrap("snapshot: open store", sandbox.ErrInvalid, err)
	}
	s := &Store{dir: abs, log: opts.Logger, limits: opts.Limits.withDefaults(),
		packed: map[string]packLoc{}, packSums: map[string][]string{}}
	if s.log == nil {
		s.log = slog.Default()
	}
	for _, d := range []string{abs, s.objectsDir(), s.packsDir(), s.snapshotsDir(), s.tmpDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, sandbox.Wrap("snapshot: open store", nil, fmt.Errorf("create %s: %w", d, err))
		}
	}
	f, err := os.OpenFile(s.lockPath(), os.O_RDONLY|os.O_CREATE, 0o600)
	if err != nil {
		return nil, sandbox.Wrap("snapshot: open store", nil, fmt.Errorf("create lock in %s: %w", abs, err))
	}
	f.Close()
	s.cleanStaging()
	return s, nil
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

func (s *Store) objectsDir() string   { return filepath.Join(s.dir, "objects") }
func (s *Store) snapshotsDir() string { return filepath.Join(s.dir, "snapshots") }
func (s *Store) tmpDir() string       { return filepath.Join(s.dir, "tmp") }
func (s *Store) lockPath() string     { return filepath.Join(s.dir, "lock") }

func (s *Store) objectPath(sum string) string {
	return filepath.Join(s.objectsDir(), sum[:2], sum[2:])
}

func (s *Store) manifestPath(id string) string {
	return filepath.Join(s.snapshotsDir(), id+".json")
}

// lock takes the store lock, shared or exclusive; the returned func
// releases it.
func (s *Store) lock(ctx context.Context, exclusive bool) (func(), error) {
	f, err := os.Open(s.lockPath())
	if err != nil {
		return nil, fmt.Errorf("open store lock: %w", err)
	}
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	if err := flockCtx(ctx, int(f.Fd()), how); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock store %s: %w", s.dir, err)
	}
	// Packs only change under the lock: load what was published since.
	if err := s.refreshPacks(); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}

// cleanStaging removes staging directories that no live process holds:
// their save was interrupted, and nothing in them is referenced.
func (s *Store) cleanStaging() {
	ents, err := os.ReadDir(s.tmpDir())
	if err != nil {
		s.log.Warn("snapshot: cannot list staging directory", "dir", s.tmpDir(), "err", err)
		return
	}
	for _, e := range ents {
		p := filepath.Join(s.tmpDir(), e.Name())
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		// A save holds an exclusive flock on its staging directory; a
		// lock we can take belongs to a process that is gone.
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			s.log.Warn("snapshot: cannot remove stale staging", "path", p, "err", err)
		} else {
			s.log.Debug("snapshot: removed staging of an interrupted save", "path", p)
		}
		f.Close()
	}
}

// resolve turns a full ID or a unique prefix into an ID.
func (s *Store) resolve(ref string) (string, error) {
	ref = strings.ToLower(strings.TrimSpace(ref))
	if ref == "" || len(ref) > 64 || strings.Trim(ref, "0123456789abcdef") != "" {
		return "", sandbox.Errorf(sandbox.ErrInvalid, "snapshot reference %q is not a hex snapshot ID", ref)
	}
	if len(ref) == 64 {
		if _, err := os.Lstat(s.manifestPath(ref)); err == nil {
			return ref, nil
		}
		return "", s.notFound(ref)
	}
	ids, err := s.ids()
	if err != nil {
		return "", err
	}
	var match []string
	for _, id := range ids {
		if strings.HasPrefix(id, ref) {
			match = append(match, id)
		}
	}
	switch len(match) {
	case 0:
		return "", s.notFound(ref)
	case 1:
		return match[0], nil
	}
	return "", sandbox.Errorf(sandbox.ErrInvalid, "snapshot reference %q is ambiguous in %s: it matches %d snapshots (give more digits)", ref, s.dir, len(match))
}

func (s *Store) notFound(ref string) error {
	return sandbox.Errorf(sandbox.ErrNotFound, "snapshot %s not found in %s (agentbox snapshot ls lists them)", ref, s.dir)
}

// ids lists the snapshot IDs in the store.
func (s *Store) ids() ([]string, error) {
	ents, err := os.ReadDir(s.snapshotsDir())
	if err != nil {
		return nil, sandbox.Wrap("snapshot: list", nil, err)
	}
	var ids []string
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if ok && isHexDigest(id) && e.Type().IsRegular() {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// load reads and validates the manifest of ref.
func (s *Store) load(ref string) (string, *Manifest, error) {
	id, err := s.resolve(ref)
	if err != nil {
		return "", nil, err
	}
	f, err := os.Open(s.manifestPath(id))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil, s.notFound(ref)
	}
	if err != nil {
		return "", nil, sandbox.Wrap("snapshot: read manifest", nil, err)
	}
	defer f.Close()
	// A manifest is bounded by the entry limit; read at most a generous
	// multiple of it so a planted huge file cannot exhaust memory.
	data, err := io.ReadAll(io.LimitReader(f, s.limits.MaxEntries*(2*maxPathLen+512)))
	if err != nil {
		return "", nil, sandbox.Wrap("snapshot: read manifest", nil, err)
	}
	m, err := decodeManifest(data, id, s.limits)
	if err != nil {
		return "", nil, corrupt(id, err)
	}
	return id, m, nil
}

// corrupt wraps a verification failure of snapshot id.
func corrupt(id string, err error) error {
	if !errors.Is(err, ErrCorrupt) {
		err = fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return sandbox.Wrap("snapshot "+short(id), sandbox.ErrInvalid, err)
}

// failure wraps err of an operation on snapshot id: as corruption when it
// is one, else as a plain failure of op.
func failure(id, op string, err error) error {
	if errors.Is(err, ErrCorrupt) {
		return corrupt(id, err)
	}
	return sandbox.Wrap(op, nil, err)
}

// short is the 12-digit prefix used in messages and listings.
func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// Manifest returns the validated manifest of ref (an ID or unique prefix).
func (s *Store) Manifest(ctx context.Context, ref string) (string, *Manifest, error) {
	if err := ctx.Err(); err != nil {
		return "", nil, err
	}
	return s.load(ref)
}

// Get describes one snapshot.
func (s *Store) Get(ctx context.Context, ref string) (Info, error) {
	id, m, err := s.Manifest(ctx, ref)
	if err != nil {
		return Info{}, err
	}
	return Info{ID: id, Header: m.Header}, nil
}

// List describes every snapshot, oldest first. A manifest that fails
// validation is logged and left out (Verify names the problem).
func (s *Store) List(ctx context.Context) ([]Info, error) {
	ids, err := s.ids()
	if err != nil {
		return nil, err
	}
	infos := make([]Info, 0, len(ids))
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		_, m, err := s.load(id)
		if err != nil {
			s.log.Warn("snapshot: skipping unreadable snapshot in listing", "id", id, "err", err)
			continue
		}
		infos = append(infos, Info{ID: id, Header: m.Header})
	}
	slices.SortFunc(infos, func(a, b Info) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return infos, nil
}
