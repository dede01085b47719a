package linux

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/agentbox/agentbox/sandbox"
)

// Identity. As root, every session has a user namespace of its own whose
// ids 0..sessionIDs-1 map to a slot of host ids that no host account owns
// and no other live session shares: root inside is no one outside, and
// the per-user limits the kernel keeps (inotify instances, ucounts) of
// one session are apart from the host's and every other session's.
//
// The slots are carved from a block reserved for agentbox: the entry of
// user "agentbox" in /etc/subuid and /etc/subgid (scripts/setup.sh makes
// it), or Options.IDs, else defaultIDs when no host account, group or
// other subordinate range lies in it.

// sessionIDs is how many ids a session's user namespace maps.
const sessionIDs = 65536

// IDRange is a block of host ids [Base, Base+Count).
type IDRange struct {
	Base, Count uint32
}

func (r IDRange) String() string {
	return fmt.Sprintf("%d-%d", r.Base, uint64(r.Base)+uint64(r.Count)-1)
}

func (r IDRange) contains(id uint64) bool {
	return id >= uint64(r.Base) && id < uint64(r.Base)+uint64(r.Count)
}

// overlaps reports whether [base, base+count) meets r.
func (r IDRange) overlaps(base, count uint64) bool {
	return base < uint64(r.Base)+uint64(r.Count) && uint64(r.Base) < base+count
}

// defaultIDs is the block used when none is configured: past the range
// systemd gives containers (524288-1879048191) and below 2^31, which some
// tools take ids for signed.
var defaultIDs = IDRange{Base: 0x70000000, Count: 0x10000000}

// subIDName is the name whose /etc/subuid and /etc/subgid entries reserve
// agentbox's block.
const subIDName = "agentbox"

// findIDs returns the block sessions take their ids from, checked: the
// configured one, else the subordinate-id entries of "agentbox", else the
// default when it is free. The error says what is wrong and how to mend.
func findIDs(configured IDRange, etc string) (IDRange, string, error) {
	uids, uerr := readSubIDs(filepath.Join(etc, "subuid"))
	gids, gerr := readSubIDs(filepath.Join(etc, "subgid"))
	if err := errors.Join(uerr, gerr); err != nil {
		return IDRange{}, "", err
	}
	r, from := configured, "Options.IDs"
	if r.Count == 0 {
		u, uok := uids[subIDName]
		g, gok := gids[subIDName]
		switch {
		case uok && gok && u == g:
			r, from = u, fmt.Sprintf("%s/subuid and subgid (%s)", etc, subIDName)
		case uok || gok:
			return IDRange{}, "", fmt.Errorf("the %q entries of %s/subuid (%v) and %s/subgid (%v) differ; make them one range (scripts/setup.sh writes them)", subIDName, etc, u, etc, g)
		default:
			r, from = defaultIDs, "the default block"
		}
	}
	if r.Count < sessionIDs {
		return IDRange{}, "", fmt.Errorf("the id range %s (%s) holds fewer than the %d ids one session maps", r, from, sessionIDs)
	}
	if uint64(r.Base)+uint64(r.Count) > 1<<32-1 {
		return IDRange{}, "", fmt.Errorf("the id range %s (%s) runs past the last id", r, from)
	}
	// No host account or group, and no one else's subordinate range, may
	// own an id a sandbox runs as.
	for _, f := range []string{"passwd", "group"} {
		ids, err := readAccountIDs(filepath.Join(etc, f))
		if err != nil {
			return IDRange{}, "", err
		}
		for name, id := range ids {
			if r.contains(id) {
				return IDRange{}, "", fmt.Errorf("the id range %s (%s) holds id %d of %q in %s/%s; reserve a free range for sandboxes: add %q to %s/subuid and %s/subgid",
					r, from, id, name, etc, f, subIDName+":START:COUNT", etc, etc)
			}
		}
	}
	for file, m := range map[string]map[string]IDRange{"subuid": uids, "subgid": gids} {
		for name, o := range m {
			if name != subIDName && r.overlaps(uint64(o.Base), uint64(o.Count)) {
				return IDRange{}, "", fmt.Errorf("the id range %s (%s) overlaps %q's range %s in %s/%s; give agentbox a range of its own", r, from, name, o, etc, file)
			}
		}
	}
	return r, from, nil
}

// readSubIDs reads a subordinate-id file (name:start:count per line); a
// missing file is empty.
func readSubIDs(p string) (map[string]IDRange, error) {
	out := map[string]IDRange{}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		parts := strings.Split(line, ":")
		if len(parts) != 3 {
			return nil, fmt.Errorf("%s:%d: want name:start:count", p, n)
		}
		start, err1 := strconv.ParseUint(parts[1], 10, 32)
		count, err2 := strconv.ParseUint(parts[2], 10, 32)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s:%d: want name:start:count", p, n)
		}
		out[parts[0]] = IDRange{Base: uint32(start), Count: uint32(count)}
	}
	return out, sc.Err()
}

// readAccountIDs reads the ids of /etc/passwd or /etc/group (the third
// field), by name.
func readAccountIDs(p string) (map[string]uint64, error) {
	out := map[string]uint64{}
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Split(line, ":")
		if len(f) < 3 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if id, err := strconv.ParseUint(f[2], 10, 32); err == nil {
			out[f[0]] = id
		}
	}
	return out, nil
}

// idSlots hands out the slots of a block, one per live session: slot n is
// the ids [Base + n*sessionIDs, +sessionIDs). A slot is claimed by making
// the file <n> in slotDir (O_EXCL: two clients on one host never take the
// same one), which holds the session directory's absolute path, and freed
// when the session is released. A slot whose session is gone (its directory is) is
// free again. The slots are the host's, not a state directory's: clients
// with different state directories (a server and a CLI, tests) draw on
// one block and must not hand out the same ids.
type idSlots struct {
	block IDRange
	dir   string // slotDir
}

// slotDir holds the id slots of every client on the host. Only root
// clients use slots, and /run is root's.
const slotDir = "/run/agentbox/ids"

func (s idSlots) count() uint32 { return s.block.Count / sessionIDs }

// base is the first host id of slot n.
func (s idSlots) base(n uint32) uint32 { return s.block.Base + n*sessionIDs }

// claim takes a free slot for the session of sessionDir (trying from a
// place derived from its path, so that concurrent claims rarely meet) and
// returns its first host id.
func (s idSlots) claim(sessionDir string) (uint32, error) {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return 0, fmt.Errorf("id slots: %w", err)
	}
	n := s.count()
	start := uint32(0)
	for _, c := range filepath.Base(sessionDir) {
		start = start*31 + uint32(c)
	}
	for i := uint32(0); i < n; i++ {
		slot := (start + i) % n
		p := filepath.Join(s.dir, strconv.FormatUint(uint64(slot), 10))
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			if stale(p) {
				_ = os.Remove(p) // then the next pass of another client, or this one, takes it
			}
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("id slots: %w", err)
		}
		_, err = f.WriteString(sessionDir)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = os.Remove(p)
			return 0, fmt.Errorf("id slots: %w", err)
		}
		return s.base(slot), nil
	}
	return 0, sandbox.Wrap("linux: create", sandbox.ErrUnavailable,
		fmt.Errorf("every one of the %d id slots of %s is taken by a live session; end some, or reserve a larger range", n, s.block))
}

// stale reports whether the slot file p names a session directory that
// is gone.
func stale(p string) bool {
	b, err := os.ReadFile(p)
	if err != nil || !filepath.IsAbs(string(b)) || strings.ContainsRune(string(b), 0) {
		return false
	}
	_, err = os.Lstat(string(b))
	return errors.Is(err, fs.ErrNotExist)
}

// release frees the slot whose first host id is base, when it is the
// session's of sessionDir.
func (s idSlots) release(base uint32, sessionDir string) {
	if base < s.block.Base || s.block.Count == 0 {
		return
	}
	p := filepath.Join(s.dir, strconv.FormatUint(uint64((base-s.block.Base)/sessionIDs), 10))
	if b, err := os.ReadFile(p); err == nil && string(b) == sessionDir {
		_ = os.Remove(p)
	}
}

// releaseDir frees the slot that names sessionDir, if one does: for a
// session whose maker died before it recorded its slot.
func (s idSlots) releaseDir(sessionDir string) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		p := filepath.Join(s.dir, e.Name())
		if b, err := os.ReadFile(p); err == nil && string(b) == sessionDir {
			_ = os.Remove(p)
		}
	}
}
