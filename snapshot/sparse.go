package snapshot

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Holes: a sparse file (truncate -s 512M f) reads as zeros where it has no
// blocks. A save asks the file system where its data is (SEEK_DATA,
// SEEK_HOLE), reads only that, and records the rest as holes in the
// manifest entry; a restore writes only the data and leaves the holes
// unallocated. An entry's object is still its whole content (holes read as
// zeros, which compress to almost nothing), so its sha256 is the file's,
// whatever its layout.
//
// Holes are recorded for at most maxHoles ranges per snapshot (a sandbox
// could otherwise make a file of a million holes and a manifest to match);
// past that, files are stored as if dense, which changes only the space a
// restore takes.
const maxHoles = 1 << 16

// Hole is a range of a file that holds no data: Off and Len in bytes.
type Hole [2]int64

// sparseReader reads a file's content up to size, zeros for its holes
// without reading them, and records the holes it met. It can be rewound
// (Seek(0, io.SeekStart)) for another pass, which records them anew.
type sparseReader struct {
	f       *rawFile
	size    int64
	budget  *atomic.Int64 // holes this save may still record
	off     int64
	holeEnd int64 // [.., holeEnd) is a hole when off is before it
	dataEnd int64 // [.., dataEnd) is data
	holes   []Hole
}

func newSparseReader(f *rawFile, size int64, budget *atomic.Int64) *sparseReader {
	return &sparseReader{f: f, size: size, budget: budget}
}

func (r *sparseReader) Read(p []byte) (int, error) {
	if r.off >= r.size || len(p) == 0 {
		if r.off >= r.size {
			return 0, io.EOF
		}
		return 0, nil
	}
	if r.off >= r.holeEnd && r.off >= r.dataEnd {
		r.next()
	}
	if r.off < r.holeEnd {
		n := int(min(int64(len(p)), r.holeEnd-r.off))
		clear(p[:n])
		r.off += int64(n)
		return n, nil
	}
	n := int(min(int64(len(p)), r.dataEnd-r.off))
	for {
		m, err := unix.Pread(r.f.fd, p[:n], r.off)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("read %s: %w", r.f.name, err)
		}
		if m == 0 { // the file shrank while read: it ends here
			r.size = r.off
			return 0, io.EOF
		}
		r.off += int64(m)
		return m, nil
	}
}

// next maps the region at off: a hole up to the next data, if any, then
// data up to the next hole. A file system without SEEK_DATA, or a spent
// budget, makes the rest data.
func (r *sparseReader) next() {
	r.dataEnd = r.size
	if r.budget.Load() <= 0 {
		return
	}
	data, err := unix.Seek(r.f.fd, r.off, unix.SEEK_DATA)
	switch {
	case errors.Is(err, unix.ENXIO):
		data = r.size // nothing but a hole up to the end
	case err != nil:
		return
	}
	data = min(data, r.size)
	if data > r.off {
		if r.budget.Add(-1) < 0 {
			return
		}
		r.holes = append(r.holes, Hole{r.off, data - r.off})
		r.holeEnd = data
	}
	if data < r.size {
		if end, err := unix.Seek(r.f.fd, data, unix.SEEK_HOLE); err == nil && end > data && end < r.size {
			r.dataEnd = end
		}
	}
}

// Seek rewinds for another pass; it supports nothing else.
func (r *sparseReader) Seek(off int64, whence int) (int64, error) {
	if off != 0 || whence != io.SeekStart {
		return 0, fmt.Errorf("sparse reader of %s: only a rewind is supported", r.f.name)
	}
	r.off, r.holeEnd, r.dataEnd, r.holes = 0, 0, 0, nil
	return 0, nil
}

// holeCursor walks a file's content in order, telling its hole runs
// from its data runs.
type holeCursor struct {
	holes []Hole
	off   int64
}

// each calls fn for each run of p, the content at the cursor, in order;
// hole runs must be zeros. It stops at fn's first error.
func (c *holeCursor) each(p []byte, fn func(run []byte, at int64, hole bool) error) error {
	for len(p) > 0 {
		for len(c.holes) > 0 && c.off >= c.holes[0][0]+c.holes[0][1] {
			c.holes = c.holes[1:]
		}
		hole := len(c.holes) > 0 && c.off >= c.holes[0][0]
		n := len(p)
		switch {
		case hole:
			n = int(min(int64(n), c.holes[0][0]+c.holes[0][1]-c.off))
			for _, b := range p[:n] {
				if b != 0 {
					return fmt.Errorf("%w: data at offset %d, where the entry says the file has a hole", ErrCorrupt, c.off)
				}
			}
		case len(c.holes) > 0:
			n = int(min(int64(n), c.holes[0][0]-c.off))
		}
		if err := fn(p[:n], c.off, hole); err != nil {
			return err
		}
		c.off += int64(n)
		p = p[n:]
	}
	return nil
}

// holeWriter writes a file's content at its offsets, skipping what its
// entry says are holes, which must hold zeros: the object and the
// manifest then agree, whoever made them.
type holeWriter struct {
	f   *rawFile
	cur holeCursor
}

func (w *holeWriter) Write(p []byte) (int, error) {
	err := w.cur.each(p, func(run []byte, at int64, hole bool) error {
		for m := 0; !hole && m < len(run); {
			k, err := unix.Pwrite(w.f.fd, run[m:], at+int64(m))
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil {
				return fmt.Errorf("write %s: %w", w.f.name, err)
			}
			m += k
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// checkHoles accepts holes that are in order, apart, non-empty and
// within a file of size bytes.
func checkHoles(holes []Hole, size int64) error {
	var end int64 = -1
	for _, h := range holes {
		if h[0] < 0 || h[1] <= 0 || h[0] <= end || h[1] > size-h[0] {
			return fmt.Errorf("hole %d+%d is out of order, empty, adjacent to another or beyond the size %d", h[0], h[1], size)
		}
		end = h[0] + h[1]
	}
	return nil
}

// formatHoles and parseHoles are the PAX record of an exported file's
// holes: "OFF+LEN,OFF+LEN".
func formatHoles(holes []Hole) string {
	parts := make([]string, len(holes))
	for i, h := range holes {
		parts[i] = strconv.FormatInt(h[0], 10) + "+" + strconv.FormatInt(h[1], 10)
	}
	return strings.Join(parts, ",")
}

func parseHoles(s string, size int64) ([]Hole, error) {
	parts := strings.Split(s, ",")
	if len(parts) > maxHoles {
		return nil, fmt.Errorf("more than %d holes", maxHoles)
	}
	holes := make([]Hole, len(parts))
	for i, p := range parts {
		a, b, ok := strings.Cut(p, "+")
		off, err1 := strconv.ParseInt(a, 10, 64)
		n, err2 := strconv.ParseInt(b, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("malformed hole %q", p)
		}
		holes[i] = Hole{off, n}
	}
	return holes, checkHoles(holes, size)
}
