package snapshot

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Packs hold the small objects of one save in a single file, with an index
// beside it: a workspace of tens of thousands of small files then costs a
// few inodes in the store instead of one each (creating inodes is what
// dominated saving such trees). Larger objects stay loose files.
//
//	packs/<name>.pack  zstd frames, one after the other
//	packs/<name>.idx   "AGENTBOX-PACK-IDX 1\n", then per object its sha256
//	                   (32 bytes), offset and length (8 bytes each, big
//	                   endian), then the sha256 of all that
//
// A pack is published before its index, so an index always has its pack;
// a pack without an index (a crash in between) is removed by GC. A pack is
// removed when none of its objects is referenced any more.

const idxMagic = "AGENTBOX-PACK-IDX 1\n"

type packLoc struct {
	pack     string // pack name
	off, len int64
}

type idxEntry struct {
	sum      [32]byte
	off, len int64
}

func (s *Store) packsDir() string { return filepath.Join(s.dir, "packs") }

// refreshPacks loads the indexes published since the last call and forgets
// removed ones; an unreadable index is logged and skipped. Callers hold the store lock, so no pack appears or goes
// while they use what this loaded.
func (s *Store) refreshPacks() error {
	ents, err := os.ReadDir(s.packsDir())
	if err != nil {
		return fmt.Errorf("list packs: %w", err)
	}
	s.packMu.Lock()
	defer s.packMu.Unlock()
	present := map[string]bool{}
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".idx")
		if !ok {
			continue
		}
		present[name] = true
		if s.packSums[name] != nil {
			continue
		}
		idx, err := readIdx(filepath.Join(s.packsDir(), e.Name()))
		if err != nil {
			// Its objects count as missing: snapshots that need them fail
			// verification, and new saves store those contents again. GC
			// refuses to run until the index is repaired or removed.
			s.log.Warn("snapshot: ignoring an unreadable pack index", "pack", name, "err", err)
			continue
		}
		sums := make([]string, len(idx))
		for i, ie := range idx {
			sum := hex.EncodeToString(ie.sum[:])
			sums[i] = sum
			s.packed[sum] = packLoc{pack: name, off: ie.off, len: ie.len}
		}
		s.packSums[name] = sums
	}
	for name, sums := range s.packSums {
		if present[name] {
			continue
		}
		for _, sum := range sums {
			if s.packed[sum].pack == name {
				delete(s.packed, sum)
			}
		}
		delete(s.packSums, name)
	}
	return nil
}

func (s *Store) lookupPacked(sum string) (packLoc, bool) {
	s.packMu.RLock()
	defer s.packMu.RUnlock()
	loc, ok := s.packed[sum]
	return loc, ok
}

func writeIdx(path string, entries []idxEntry) error {
	var b bytes.Buffer
	b.WriteString(idxMagic)
	for _, e := range entries {
		b.Write(e.sum[:])
		b.Write(binary.BigEndian.AppendUint64(nil, uint64(e.off)))
		b.Write(binary.BigEndian.AppendUint64(nil, uint64(e.len)))
	}
	sum := sha256.Sum256(b.Bytes())
	b.Write(sum[:])
	return writeNew(path, b.Bytes())
}

func readIdx(path string) ([]idxEntry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read pack index: %w", err)
	}
	const rec = 48
	body, ok := bytes.CutPrefix(data, []byte(idxMagic))
	if !ok || len(body) < 32 || (len(body)-32)%rec != 0 {
		return nil, fmt.Errorf("%w: pack index %s is malformed", ErrCorrupt, filepath.Base(path))
	}
	if sum := sha256.Sum256(data[:len(data)-32]); !bytes.Equal(sum[:], data[len(data)-32:]) {
		return nil, fmt.Errorf("%w: pack index %s fails its checksum", ErrCorrupt, filepath.Base(path))
	}
	body = body[:len(body)-32]
	out := make([]idxEntry, len(body)/rec)
	for i := range out {
		r := body[i*rec:]
		copy(out[i].sum[:], r[:32])
		out[i].off = int64(binary.BigEndian.Uint64(r[32:40]))
		out[i].len = int64(binary.BigEndian.Uint64(r[40:48]))
		if out[i].off < 0 || out[i].len <= 0 || out[i].len > 2*smallObject {
			return nil, fmt.Errorf("%w: pack index %s has a bad entry", ErrCorrupt, filepath.Base(path))
		}
	}
	return out, nil
}

// packWriter appends one save's small objects to its pack; the stager
// serializes calls.
type packWriter struct {
	name    string
	f       *rawFile
	off     int64
	entries []idxEntry
}

func newPackName() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (p *packWriter) append(sum string, comp []byte) error {
	var e idxEntry
	if _, err := hex.Decode(e.sum[:], []byte(sum)); err != nil {
		return err
	}
	if _, err := p.f.Write(comp); err != nil {
		return err
	}
	e.off, e.len = p.off, int64(len(comp))
	p.off += e.len
	p.entries = append(p.entries, e)
	return nil
}

// readPacked reads the compressed bytes of loc through the worker's cache
// of open packs.
func (s *Store) readPacked(w *worker, loc packLoc) ([]byte, error) {
	f := w.packs[loc.pack]
	if f == nil {
		var err error
		f, err = openRaw(filepath.Join(s.packsDir(), loc.pack+".pack"), unix.O_RDONLY, 0)
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: pack %s is missing", ErrCorrupt, short(loc.pack))
		}
		if err != nil {
			return nil, err
		}
		if w.packs == nil {
			w.packs = map[string]*rawFile{}
		}
		w.packs[loc.pack] = f
	}
	buf := make([]byte, loc.len)
	for done := 0; done < len(buf); {
		n, err := unix.Pread(f.fd, buf[done:], loc.off+int64(done))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read pack %s: %w", short(loc.pack), err)
		}
		if n == 0 {
			return nil, fmt.Errorf("%w: pack %s is truncated", ErrCorrupt, short(loc.pack))
		}
		done += n
	}
	return buf, nil
}

// collectPacks removes packs none of whose objects is live, and packs
// left without an index by a crash. The caller holds the lock exclusively.
func (s *Store) collectPacks(live map[string]bool) (int, error) {
	ents, err := os.ReadDir(s.packsDir())
	if err != nil {
		return 0, err
	}
	names := map[string]bool{}
	for _, e := range ents {
		names[e.Name()] = true
	}
	removed := 0
	for n := range names {
		name, ok := strings.CutSuffix(n, ".pack")
		if !ok {
			continue
		}
		idxPath := filepath.Join(s.packsDir(), name+".idx")
		if names[name+".idx"] {
			idx, err := readIdx(idxPath)
			if err != nil {
				return removed, err // never drop objects because an index is unreadable
			}
			used := false
			for _, e := range idx {
				if live[hex.EncodeToString(e.sum[:])] {
					used = true
					break
				}
			}
			if used {
				continue
			}
			if err := os.Remove(idxPath); err != nil {
				return removed, err
			}
			removed += len(idx)
		}
		if err := os.Remove(filepath.Join(s.packsDir(), n)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return removed, err
		}
	}
	return removed, s.refreshPacks()
}
