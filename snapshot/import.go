package snapshot

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/agentbox/agentbox/sandbox"
)

// Import reads a tar archive (plain, gzip or zstd compressed; as written by
// Export or by tar) into the store as a new snapshot. The archive is
// untrusted: absolute names, ".." components, entries below a file or
// symlink, duplicates, symlinks that may leave the root, hard links to
// anything but an earlier file of the archive, devices, fifos and other
// special entries are refused, and Limits (entries, total bytes, expansion
// ratio) are enforced while reading, before anything is published. Files
// that carry an AGENTBOX.sha256 record must match it. Missing parent
// directories are created with mode 0755.
func (s *Store) Import(ctx context.Context, r io.Reader) (Info, error) {
	const op = "snapshot: import"
	unlock, err := s.lock(ctx, false)
	if err != nil {
		return Info{}, sandbox.Wrap(op, nil, err)
	}
	defer unlock()
	st, err := s.newStager("import")
	if err != nil {
		return Info{}, sandbox.Wrap(op, nil, err)
	}
	defer st.abort()
	im := &importer{s: s, st: st, lim: s.limits, w: newWorker(), byPath: map[string]int{}}
	defer im.w.close()
	m, err := im.run(ctx, r)
	if err != nil {
		return Info{}, sandbox.Wrap(op, sandbox.ErrInvalid, err)
	}
	info, err := st.publish(m)
	if err != nil {
		return Info{}, sandbox.Wrap(op, nil, err)
	}
	return info, nil
}

type importer struct {
	s      *Store
	st     *stager
	lim    Limits
	w      *worker
	in     *countReader // raw bytes consumed, for the expansion ratio
	out    int64        // file bytes produced
	zeros  int64        // of which in declared holes (checked zeros, never stored)
	holes  int          // holes declared so far
	header *Header
	ents   []Entry
	byPath map[string]int
	// explicit marks entries that came from the archive, not synthesized.
	explicit map[string]bool
}

// zstdMagic and gzipMagic open compressed streams.
var (
	zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}
	gzipMagic = []byte{0x1f, 0x8b}
)

func (im *importer) run(ctx context.Context, r io.Reader) (*Manifest, error) {
	im.in = &countReader{r: r}
	br := bufio.NewReader(im.in)
	var src io.Reader = br
	magic, _ := br.Peek(4)
	switch {
	case bytes.HasPrefix(magic, zstdMagic):
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(64<<20))
		if err != nil {
			return nil, fmt.Errorf("open zstd stream: %w", err)
		}
		defer zr.Close()
		src = zr
	case bytes.HasPrefix(magic, gzipMagic):
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("open gzip stream: %w", err)
		}
		src = zr
	}
	im.explicit = map[string]bool{}
	im.add(Entry{Path: ".", Type: TypeDir, Mode: 0o755, MTime: time.Unix(0, 0).UTC()})
	tr := tar.NewReader(src)
	for n := int64(0); ; n++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if n >= im.lim.MaxEntries {
			return nil, fmt.Errorf("archive has more than %d entries (the limit)", im.lim.MaxEntries)
		}
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read archive: %w", err)
		}
		if err := im.checkExpansion(); err != nil {
			return nil, err
		}
		if err := im.entry(h, tr); err != nil {
			return nil, err
		}
	}
	m := &Manifest{Header: Header{Version: FormatVersion, Created: time.Now().UTC()}}
	if im.header != nil {
		m.Header = *im.header
		m.Version = FormatVersion
		m.Created = normTime(m.Created)
		if !isHexDigest(m.Parent) {
			m.Parent = ""
		}
	}
	m.Entries = im.ents
	slices.SortFunc(m.Entries[1:], func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
	m.computeTotals()
	m.setVersion()
	if err := m.validate(im.lim); err != nil {
		return nil, err
	}
	return m, nil
}

// entry takes one tar header (and its content).
func (im *importer) entry(h *tar.Header, tr *tar.Reader) error {
	if h.Typeflag == tar.TypeXGlobalHeader {
		if v, ok := h.PAXRecords[paxHeader]; ok {
			var hd Header
			if err := json.Unmarshal([]byte(v), &hd); err != nil {
				return fmt.Errorf("agentbox header in the archive: %w", err)
			}
			im.header = &hd
		}
		return nil
	}
	p, err := archivePath(h.Name)
	if err != nil {
		return err
	}
	e := Entry{Path: p, Mode: uint32(h.Mode & 0o7777), MTime: normTime(h.ModTime)}
	switch h.Typeflag {
	case tar.TypeDir:
		e.Type = TypeDir
	//lint:ignore SA1019 archives from old tar writers still use TypeRegA
	case tar.TypeReg, tar.TypeRegA:
		e.Type = TypeFile
		if err := im.content(&e, h, tr); err != nil {
			return err
		}
	case tar.TypeSymlink:
		e.Type, e.Target, e.Mode = TypeSymlink, h.Linkname, 0o777
		if p == "." {
			return errors.New("archive root is a symlink")
		}
		if err := checkLinkTarget(p, h.Linkname); err != nil {
			return err
		}
	case tar.TypeLink:
		// A hard link becomes a copy of a file already in the archive.
		t, err := archivePath(h.Linkname)
		if err != nil {
			return fmt.Errorf("hard link %q: %w", h.Name, err)
		}
		i, ok := im.byPath[t]
		if !ok || im.ents[i].Type != TypeFile || !im.explicit[t] {
			return fmt.Errorf("hard link %q -> %q does not name an earlier file of the archive", h.Name, h.Linkname)
		}
		src := im.ents[i]
		e.Type, e.Size, e.SHA256, e.Holes = TypeFile, src.Size, src.SHA256, src.Holes
		if im.holes += len(src.Holes); im.holes > maxHoles {
			return fmt.Errorf("hard link %q: the archive declares more than %d holes", h.Name, maxHoles)
		}
		im.out += src.Size
		if im.out > im.lim.MaxTotalBytes {
			return fmt.Errorf("archive content exceeds the limit of %d bytes", im.lim.MaxTotalBytes)
		}
	case tar.TypeChar, tar.TypeBlock:
		return fmt.Errorf("archive entry %q is a device file, which a snapshot never holds", h.Name)
	case tar.TypeFifo:
		return fmt.Errorf("archive entry %q is a fifo, which a snapshot never holds", h.Name)
	default:
		return fmt.Errorf("archive entry %q has unsupported type %q", h.Name, h.Typeflag)
	}
	if p == "." && e.Type != TypeDir {
		return fmt.Errorf("archive root entry %q is not a directory", h.Name)
	}
	return im.place(e)
}

// place adds e, creating missing parents, refusing duplicates and entries
// below anything but a directory.
func (im *importer) place(e Entry) error {
	if e.Path != "." {
		if err := im.parents(path.Dir(e.Path)); err != nil {
			return fmt.Errorf("archive entry %q: %w", e.Path, err)
		}
	}
	if i, ok := im.byPath[e.Path]; ok {
		if im.explicit[e.Path] || e.Type != TypeDir {
			return fmt.Errorf("archive entry %q appears twice", e.Path)
		}
		im.ents[i] = e // a directory named after its children
		im.explicit[e.Path] = true
		return nil
	}
	if int64(len(im.ents)) >= im.lim.MaxEntries {
		return fmt.Errorf("archive has more than %d entries (the limit)", im.lim.MaxEntries)
	}
	im.add(e)
	im.explicit[e.Path] = true
	return nil
}

func (im *importer) parents(dir string) error {
	if dir == "." {
		return nil
	}
	if i, ok := im.byPath[dir]; ok {
		if im.ents[i].Type != TypeDir {
			return fmt.Errorf("%q is a %s, not a directory", dir, im.ents[i].Type)
		}
		return nil
	}
	if err := im.parents(path.Dir(dir)); err != nil {
		return err
	}
	if int64(len(im.ents)) >= im.lim.MaxEntries {
		return fmt.Errorf("archive has more than %d entries (the limit)", im.lim.MaxEntries)
	}
	im.add(Entry{Path: dir, Type: TypeDir, Mode: 0o755, MTime: time.Unix(0, 0).UTC()})
	return nil
}

func (im *importer) add(e Entry) {
	im.byPath[e.Path] = len(im.ents)
	im.ents = append(im.ents, e)
}

// content stores a file's bytes, enforcing the byte and ratio limits as
// they are read.
func (im *importer) content(e *Entry, h *tar.Header, tr *tar.Reader) error {
	if h.Size < 0 || h.Size > im.lim.MaxTotalBytes-im.out {
		return fmt.Errorf("archive entry %q (%d bytes) exceeds the limit of %d content bytes", h.Name, h.Size, im.lim.MaxTotalBytes)
	}
	lr := &limitedReader{r: tr, im: im}
	if v, ok := h.PAXRecords[paxHoles]; ok {
		holes, err := parseHoles(v, h.Size)
		if err != nil {
			return fmt.Errorf("archive entry %q: its holes: %w", h.Name, err)
		}
		if im.holes += len(holes); im.holes > maxHoles {
			return fmt.Errorf("archive entry %q: the archive declares more than %d holes", h.Name, maxHoles)
		}
		lr.cur, e.Holes = &holeCursor{holes: holes}, holes
	}
	sum, size, err := im.st.put(im.w, lr)
	if err != nil {
		return fmt.Errorf("archive entry %q: %w", h.Name, err)
	}
	if want, ok := h.PAXRecords[paxSHA256]; ok && want != sum {
		return fmt.Errorf("archive entry %q: content hashes to %s but the archive says %s", h.Name, short(sum), short(want))
	}
	e.SHA256, e.Size = sum, size
	return nil
}

// checkExpansion counts the bytes a restore would write: the zeros of
// declared holes are checked, hashed and left unallocated, so they count
// toward MaxTotalBytes only.
func (im *importer) checkExpansion() error {
	if data := im.out - im.zeros; data > im.lim.ExpansionSlack && data > im.lim.MaxExpansionRatio*im.in.n {
		return fmt.Errorf("archive expands more than %dx (%d bytes from %d): refused as a decompression bomb", im.lim.MaxExpansionRatio, data, im.in.n)
	}
	return nil
}

// limitedReader counts a file's bytes into the importer and fails as soon
// as a limit is passed; with a cursor, it checks that the file's declared
// holes read as zeros.
type limitedReader struct {
	r   io.Reader
	im  *importer
	cur *holeCursor
}

func (l *limitedReader) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	if l.cur != nil {
		if cerr := l.cur.each(p[:n], func(run []byte, _ int64, hole bool) error {
			if hole {
				l.im.zeros += int64(len(run))
			}
			return nil
		}); cerr != nil {
			return n, cerr
		}
	}
	l.im.out += int64(n)
	if l.im.out > l.im.lim.MaxTotalBytes {
		return n, fmt.Errorf("archive content exceeds the limit of %d bytes", l.im.lim.MaxTotalBytes)
	}
	if cerr := l.im.checkExpansion(); cerr != nil {
		return n, cerr
	}
	return n, err
}

type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// archivePath turns a tar name into an entry path: a leading "./" and a
// trailing "/" are accepted, anything else must already be clean; "." is
// the root. Absolute names and ".." components are refused outright rather
// than cleaned, since an archive that carries them was made to escape.
func archivePath(name string) (string, error) {
	p := name
	for strings.HasPrefix(p, "./") {
		p = p[2:]
	}
	p = strings.TrimSuffix(p, "/")
	if p == "" || p == "." {
		return ".", nil
	}
	if strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("archive entry %q has an absolute name", name)
	}
	for _, c := range strings.Split(p, "/") {
		if c == ".." {
			return "", fmt.Errorf("archive entry %q climbs out with \"..\"", name)
		}
	}
	if err := checkEntryPath(p); err != nil {
		return "", fmt.Errorf("archive entry %q: %w", name, err)
	}
	return p, nil
}
