package snapshot

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"time"
)

// FormatVersion is the newest manifest format this package writes and
// reads. Version 2 adds the holes of sparse files; a manifest without any
// is written as version 1, which earlier releases read too.
const FormatVersion = 2

// formatNoHoles is the version of a manifest without holes.
const formatNoHoles = 1

// EntryType is the kind of a manifest entry.
type EntryType string

// The entry types a snapshot holds. Anything else in a workspace (devices,
// fifos, sockets) is skipped when saving and refused when importing.
const (
	TypeFile    EntryType = "file"
	TypeDir     EntryType = "dir"
	TypeSymlink EntryType = "symlink"
)

// emptySHA256 is the digest of no bytes; empty files have no object.
const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// Entry is one file, directory or symlink of a snapshot.
type Entry struct {
	// Path is slash-separated and relative to the root; "." is the root.
	Path string    `json:"path"`
	Type EntryType `json:"type"`
	// Mode holds the permission bits (and sticky, setuid, setgid as saved).
	Mode uint32 `json:"mode"`
	// Size and SHA256 describe a file's content.
	Size   int64  `json:"size,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	// Target is a symlink's target.
	Target string    `json:"target,omitempty"`
	MTime  time.Time `json:"mtime"`
	// Holes are the ranges of a sparse file that hold no data (they read
	// as zeros, and its content has zeros there); a restore leaves them
	// unallocated. In order, apart, within Size.
	Holes []Hole `json:"holes,omitempty"`
}

// Skipped is something a save left out, and why.
type Skipped struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// Totals count a snapshot's entries and content bytes.
type Totals struct {
	Files    int   `json:"files"`
	Dirs     int   `json:"dirs"`
	Symlinks int   `json:"symlinks"`
	Bytes    int64 `json:"bytes"`
}

// Header is everything in a manifest but its entries.
type Header struct {
	Version int               `json:"version"`
	Created time.Time         `json:"created"`
	Parent  string            `json:"parent,omitempty"`
	Labels  map[string]string `json:"labels,omitempty"`
	Skipped []Skipped         `json:"skipped,omitempty"`
	Total   Totals            `json:"total"`
}

// Manifest describes one snapshot: its header and its entries in path order.
type Manifest struct {
	Header
	Entries []Entry `json:"entries"`
}

// Info is what List and Get report of a snapshot.
type Info struct {
	ID string `json:"id"`
	Header
	// NewObjects and StoredBytes are set by a save: how many objects it
	// added to the store and their size on disk (compressed).
	NewObjects  int   `json:"new_objects,omitempty"`
	StoredBytes int64 `json:"stored_bytes,omitempty"`
}

// ErrCorrupt marks a snapshot whose manifest or objects fail verification.
// Errors that carry it also carry sandbox.ErrInvalid.
var ErrCorrupt = errors.New("snapshot corrupted")

// encode is the canonical manifest encoding; the snapshot ID is its sha256.
func (m *Manifest) encode() ([]byte, string, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return nil, "", fmt.Errorf("encode manifest: %w", err)
	}
	sum := sha256.Sum256(buf.Bytes())
	return buf.Bytes(), hex.EncodeToString(sum[:]), nil
}

// setVersion picks the oldest format that can say what m holds.
func (m *Manifest) setVersion() {
	m.Version = formatNoHoles
	for _, e := range m.Entries {
		if len(e.Holes) > 0 {
			m.Version = FormatVersion
			return
		}
	}
}

// computeTotals fills m.Total from the entries.
func (m *Manifest) computeTotals() {
	var t Totals
	for _, e := range m.Entries {
		switch e.Type {
		case TypeFile:
			t.Files++
			t.Bytes += e.Size
		case TypeDir:
			t.Dirs++
		case TypeSymlink:
			t.Symlinks++
		}
	}
	m.Total = t
}

// decodeManifest parses and validates manifest bytes read from the store
// under the name id: the bytes must hash to id.
func decodeManifest(data []byte, id string, lim Limits) (*Manifest, error) {
	sum := sha256.Sum256(data)
	if hex.EncodeToString(sum[:]) != id {
		return nil, fmt.Errorf("%w: manifest does not hash to its id", ErrCorrupt)
	}
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%w: parse manifest: %v", ErrCorrupt, err)
	}
	if err := m.validate(lim); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return &m, nil
}

// validate checks everything Restore relies on: versions, clean unique
// sorted paths whose parents are directories, known types, digests, sane
// modes, symlinks that stay inside the root, and the limits.
func (m *Manifest) validate(lim Limits) error {
	lim = lim.withDefaults()
	if m.Version != formatNoHoles && m.Version != FormatVersion {
		return fmt.Errorf("manifest version %d, want %d or %d (a newer agentbox wrote it?)", m.Version, formatNoHoles, FormatVersion)
	}
	if len(m.Entries) == 0 || m.Entries[0].Path != "." || m.Entries[0].Type != TypeDir {
		return errors.New("manifest does not start with the root directory")
	}
	if int64(len(m.Entries)) > lim.MaxEntries {
		return fmt.Errorf("%d entries exceed the limit of %d", len(m.Entries), lim.MaxEntries)
	}
	types := make(map[string]EntryType, len(m.Entries))
	var total int64
	holes := 0
	for i, e := range m.Entries {
		if len(e.Holes) > 0 {
			holes += len(e.Holes)
			switch {
			case e.Type != TypeFile:
				return fmt.Errorf("entry %q: a %s has no holes", e.Path, e.Type)
			case m.Version < FormatVersion:
				return fmt.Errorf("entry %q: holes in a version %d manifest", e.Path, m.Version)
			case holes > maxHoles:
				return fmt.Errorf("more than %d holes", maxHoles)
			}
			if err := checkHoles(e.Holes, e.Size); err != nil {
				return fmt.Errorf("file %q: %v", e.Path, err)
			}
		}
		if i > 0 {
			if err := checkEntryPath(e.Path); err != nil {
				return err
			}
			if i > 1 && e.Path <= m.Entries[i-1].Path {
				return fmt.Errorf("entry %q is out of order or duplicated", e.Path)
			}
			parent := path.Dir(e.Path)
			if types[parent] != TypeDir {
				return fmt.Errorf("entry %q: parent %q is not a directory of the snapshot", e.Path, parent)
			}
		}
		if e.Mode&^0o7777 != 0 {
			return fmt.Errorf("entry %q: mode %o has bits beyond permissions", e.Path, e.Mode)
		}
		switch e.Type {
		case TypeDir:
			if e.Size != 0 || e.SHA256 != "" || e.Target != "" {
				return fmt.Errorf("directory %q carries file or link fields", e.Path)
			}
		case TypeFile:
			if e.Size < 0 || !isHexDigest(e.SHA256) || e.Target != "" {
				return fmt.Errorf("file %q: bad size or sha256", e.Path)
			}
			if e.Size == 0 && e.SHA256 != emptySHA256 {
				return fmt.Errorf("file %q: empty but sha256 is not that of no bytes", e.Path)
			}
			total += e.Size
			if total > lim.MaxTotalBytes || total < 0 {
				return fmt.Errorf("content exceeds the limit of %d bytes", lim.MaxTotalBytes)
			}
		case TypeSymlink:
			if e.Size != 0 || e.SHA256 != "" {
				return fmt.Errorf("symlink %q carries file fields", e.Path)
			}
			if err := checkLinkTarget(e.Path, e.Target); err != nil {
				return err
			}
		default:
			return fmt.Errorf("entry %q has unknown type %q", e.Path, e.Type)
		}
		types[e.Path] = e.Type
	}
	want := m.Total
	m.computeTotals()
	if m.Total != want {
		return errors.New("manifest totals do not match its entries")
	}
	return nil
}

// checkEntryPath accepts a clean, relative, slash-separated path with no
// "." or ".." component, no NUL and a bounded length.
func checkEntryPath(p string) error {
	switch {
	case p == "" || p == ".":
		return fmt.Errorf("entry path %q is empty or the root", p)
	case len(p) > maxPathLen:
		return fmt.Errorf("entry path %.40q... is longer than %d bytes", p, maxPathLen)
	case strings.IndexByte(p, 0) >= 0:
		return fmt.Errorf("entry path %q contains a NUL byte", p)
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("entry path %q is absolute", p)
	case path.Clean(p) != p:
		return fmt.Errorf("entry path %q is not clean", p)
	case p == ".." || strings.HasPrefix(p, "../"):
		return fmt.Errorf("entry path %q leaves the root", p)
	}
	return nil
}

// maxPathLen bounds entry paths and symlink targets (PATH_MAX).
const maxPathLen = 4096

// checkLinkTarget accepts a symlink target only when resolving it can never
// leave the root, whatever the other entries are. The target must be
// relative, and ".." may appear only as leading components, no more of them
// than the link's depth: the link's own directory chain is made of real
// directories (validate checks that parents are directories), so those
// leading ".." resolve lexically, and every component after them descends.
// A target like "a/../.." is refused because "a" may itself be a symlink
// that makes its ".." land elsewhere (the classic chained-link escape).
func checkLinkTarget(linkPath, target string) error {
	switch {
	case target == "":
		return fmt.Errorf("symlink %q has an empty target", linkPath)
	case len(target) > maxPathLen || strings.IndexByte(target, 0) >= 0:
		return fmt.Errorf("symlink %q has a malformed target", linkPath)
	case strings.HasPrefix(target, "/"):
		return fmt.Errorf("symlink %q -> %q is absolute and leaves the root", linkPath, target)
	}
	depth := strings.Count(linkPath, "/") // directories between the root and the link
	ups := 0
	descended := false
	for _, c := range strings.Split(target, "/") {
		switch c {
		case "", ".":
		case "..":
			if descended {
				return fmt.Errorf("symlink %q -> %q climbs after descending, which may leave the root through another link", linkPath, target)
			}
			ups++
			if ups > depth {
				return fmt.Errorf("symlink %q -> %q leaves the root", linkPath, target)
			}
		default:
			descended = true
		}
	}
	return nil
}

// isHexDigest reports whether s is a lower-case hex sha256.
func isHexDigest(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// restoreMode is the mode a restored entry gets: setuid and setgid are
// dropped, because a snapshot comes from a sandbox and must not plant a
// privileged executable on the host.
func restoreMode(e Entry) fs.FileMode {
	m := fs.FileMode(e.Mode & 0o777)
	if e.Mode&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m
}
