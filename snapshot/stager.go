package snapshot

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// stager collects the new objects of one save or import in a private
// staging directory and publishes them, then the manifest, durably.
type stager struct {
	s    *Store
	dir  string
	lock *os.File // flock held while the staging directory is in use

	seq atomic.Int64
	// holeBudget is how many holes files of this save may still record.
	holeBudget atomic.Int64

	mu          sync.Mutex
	claimed     map[string]bool // sums written (or being written) here
	pending     map[string]string
	pack        *packWriter
	newObjects  int
	storedBytes int64
}

// newStager creates the staging directory and locks it, so that Open in
// another process leaves it alone while this one lives.
func (s *Store) newStager(kind string) (*stager, error) {
	dir, err := os.MkdirTemp(s.tmpDir(), kind+"-*")
	if err != nil {
		return nil, fmt.Errorf("create staging directory in %s: %w", s.tmpDir(), err)
	}
	f, err := os.Open(dir)
	if err == nil {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err != nil {
			f.Close()
		}
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("lock staging directory %s: %w", dir, err)
	}
	st := &stager{s: s, dir: dir, lock: f, claimed: map[string]bool{}, pending: map[string]string{}}
	st.holeBudget.Store(maxHoles)
	return st, nil
}

// abort removes everything staged; published snapshots are untouched.
func (st *stager) abort() {
	if st.pack != nil {
		st.pack.f.Close()
	}
	os.RemoveAll(st.dir)
	st.lock.Close()
}

// claim reports whether the caller should store sum: it is neither in the
// store already nor claimed by another file of this save.
func (st *stager) claim(sum string) bool {
	st.mu.Lock()
	if st.claimed[sum] {
		st.mu.Unlock()
		return false
	}
	st.claimed[sum] = true
	st.mu.Unlock()
	if _, ok := st.s.lookupPacked(sum); ok {
		return false
	}
	_, err := os.Lstat(st.s.objectPath(sum))
	return err != nil
}

func (st *stager) staged(sum, name string, stored int64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.pending[sum] = name
	st.newObjects++
	st.storedBytes += stored
}

// put stores the content read from r and returns its sha256 and size.
// Contents up to smallObject bytes are hashed first and compressed only
// when new; larger ones are compressed while hashed and dropped when the
// store already has them.
func (st *stager) put(w *worker, r io.Reader) (string, int64, error) {
	n, err := io.ReadFull(r, w.buf)
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return st.putSmall(w, w.buf[:n])
	case err != nil:
		return "", 0, err
	}
	if f, ok := r.(io.ReadSeeker); ok {
		return st.putTwoPass(w, f, w.buf[:n])
	}
	return st.putStream(w, io.MultiReader(bytes.NewReader(w.buf[:n]), r), "")
}

// putTwoPass stores a large file that can be read again: a first pass only
// hashes it, so that content the store already has (the common case when
// a workspace is saved again) costs no compression; new content is then
// compressed in a second pass, which hashes again and names the object by
// what it actually compressed (the file may have changed in between).
func (st *stager) putTwoPass(w *worker, f io.ReadSeeker, prefix []byte) (string, int64, error) {
	h := sha256.New()
	h.Write(prefix)
	if w.cbuf == nil {
		w.cbuf = make([]byte, 256<<10)
	}
	n, err := io.CopyBuffer(h, f, w.cbuf)
	if err != nil {
		return "", 0, err
	}
	first := hex.EncodeToString(h.Sum(nil))
	if !st.claim(first) {
		return first, int64(len(prefix)) + n, nil
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		st.unclaim(first)
		return "", 0, err
	}
	return st.putStream(w, f, first)
}

func (st *stager) putSmall(w *worker, data []byte) (string, int64, error) {
	sumb := sha256.Sum256(data)
	sum := hex.EncodeToString(sumb[:])
	if len(data) == 0 || !st.claim(sum) {
		return sum, int64(len(data)), nil
	}
	enc, _, err := codecs()
	if err != nil {
		return "", 0, err
	}
	w.out = enc.EncodeAll(data, w.out[:0])
	if err := st.appendPacked(sum, w.out); err != nil {
		st.unclaim(sum)
		return "", 0, err
	}
	return sum, int64(len(data)), nil
}

// appendPacked adds a small object to this save's pack.
func (st *stager) appendPacked(sum string, comp []byte) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.pack == nil {
		name := newPackName()
		f, err := openRaw(filepath.Join(st.dir, name+".pack"), unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		st.pack = &packWriter{name: name, f: f}
	}
	if err := st.pack.append(sum, comp); err != nil {
		return err
	}
	st.newObjects++
	st.storedBytes += int64(len(comp))
	return nil
}

func (st *stager) unclaim(sum string) {
	st.mu.Lock()
	delete(st.claimed, sum)
	st.mu.Unlock()
}

// putStream compresses r into a staged object while hashing it. claimed,
// when set, is a digest this caller already claimed for the content.
func (st *stager) putStream(w *worker, r io.Reader, claimed string) (string, int64, error) {
	name := filepath.Join(st.dir, "s"+strconv.FormatInt(st.seq.Add(1), 10))
	f, err := openRaw(name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o600)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	cw := &countWriter{w: f}
	enc, err := w.streamEncoder(cw)
	if err != nil {
		return "", 0, err
	}
	h := sha256.New()
	size, err := io.Copy(enc, io.TeeReader(r, h))
	if err == nil {
		err = enc.Close()
	}
	if err == nil {
		err = f.Close()
	}
	if err != nil {
		os.Remove(name)
		if claimed != "" {
			st.unclaim(claimed)
		}
		return "", 0, err
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if sum != claimed {
		if claimed != "" {
			st.unclaim(claimed) // changed since the first pass
		}
		if !st.claim(sum) {
			os.Remove(name)
			return sum, size, nil
		}
	}
	st.staged(sum, name, cw.n)
	return sum, size, nil
}

// publish makes the staged objects part of the store, then writes the
// manifest. Objects are flushed before they get their final names (so a
// name in objects/ always holds its whole content), and both are durable
// before the manifest that references them appears.
func (st *stager) publish(m *Manifest) (Info, error) {
	if p := st.pack; p != nil {
		if err := p.f.Close(); err != nil {
			return Info{}, err
		}
		if err := writeIdx(filepath.Join(st.dir, p.name+".idx"), p.entries); err != nil {
			return Info{}, fmt.Errorf("write pack index: %w", err)
		}
	}
	if err := st.s.syncFS(st.dir); err != nil {
		return Info{}, err
	}
	if p := st.pack; p != nil {
		for _, ext := range []string{".pack", ".idx"} { // the pack before its index
			if err := unix.Rename(filepath.Join(st.dir, p.name+ext), filepath.Join(st.s.packsDir(), p.name+ext)); err != nil {
				return Info{}, fmt.Errorf("publish pack %s: %w", short(p.name), err)
			}
		}
		if err := st.s.refreshPacks(); err != nil {
			return Info{}, err
		}
	}
	fans := map[string]bool{}
	for sum, name := range st.pending {
		fan := filepath.Dir(st.s.objectPath(sum))
		if !fans[fan] {
			if err := os.MkdirAll(fan, 0o700); err != nil {
				return Info{}, fmt.Errorf("create object directory: %w", err)
			}
			fans[fan] = true
		}
		if err := unix.Rename(name, st.s.objectPath(sum)); err != nil {
			return Info{}, fmt.Errorf("publish object %s: %w", short(sum), err)
		}
	}
	if err := st.s.syncFS(st.dir); err != nil {
		return Info{}, err
	}
	data, id, err := m.encode()
	if err != nil {
		return Info{}, err
	}
	if err := writeFileDurable(st.dir, st.s.manifestPath(id), data); err != nil {
		return Info{}, fmt.Errorf("write manifest %s: %w", short(id), err)
	}
	return Info{ID: id, Header: m.Header, NewObjects: st.newObjects, StoredBytes: st.storedBytes}, nil
}

// writeNew creates name with data; no fsync, publish flushes all at once.
func writeNew(name string, data []byte) error {
	f, err := openRaw(name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(name)
		return err
	}
	return nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
