package snapshot

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"golang.org/x/sys/unix"
	"io"
	"os"
	"runtime"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// Objects are zstd frames of file contents, named by the sha256 of the
// uncompressed bytes. Files up to smallObject bytes are compressed and
// decompressed in memory in one call; larger ones are streamed.
const smallObject = 1 << 20

// encoderLevel trades ratio for speed. SpeedFastest (zstd level 1) keeps a
// save within reach of `tar | zstd` (level 3, in C) on the same cores; see
// bench/snapshot/README.md for the figures.
const encoderLevel = zstd.SpeedFastest

var (
	sharedOnce sync.Once
	sharedEnc  *zstd.Encoder
	sharedDec  *zstd.Decoder
	sharedErr  error
)

// codecs returns the process-wide encoder and decoder used for one-shot
// EncodeAll/DecodeAll; both are safe for concurrent use.
func codecs() (*zstd.Encoder, *zstd.Decoder, error) {
	sharedOnce.Do(func() {
		n := runtime.GOMAXPROCS(0)
		sharedEnc, sharedErr = zstd.NewWriter(nil, zstd.WithEncoderLevel(encoderLevel),
			zstd.WithEncoderConcurrency(n), zstd.WithEncoderCRC(false))
		if sharedErr != nil {
			return
		}
		sharedDec, sharedErr = zstd.NewReader(nil, zstd.WithDecoderConcurrency(n),
			zstd.WithDecoderMaxMemory(4*smallObject), zstd.IgnoreChecksum(true))
	})
	return sharedEnc, sharedDec, sharedErr
}

// worker holds one goroutine's streaming codec and buffers.
type worker struct {
	buf   []byte
	enc   *zstd.Encoder
	dec   *zstd.Decoder
	out   []byte
	cbuf  []byte              // copy buffer for hashing passes
	packs map[string]*rawFile // open packs, by name
}

func newWorker() *worker { return &worker{buf: make([]byte, smallObject+1)} }

func (w *worker) streamEncoder(dst io.Writer) (*zstd.Encoder, error) {
	if w.enc == nil {
		enc, err := zstd.NewWriter(dst, zstd.WithEncoderLevel(encoderLevel),
			zstd.WithEncoderConcurrency(1), zstd.WithEncoderCRC(false))
		if err != nil {
			return nil, err
		}
		w.enc = enc
		return enc, nil
	}
	w.enc.Reset(dst)
	return w.enc, nil
}

func (w *worker) streamDecoder(src io.Reader) (*zstd.Decoder, error) {
	if w.dec == nil {
		dec, err := zstd.NewReader(src, zstd.WithDecoderConcurrency(1), zstd.IgnoreChecksum(true))
		if err != nil {
			return nil, err
		}
		w.dec = dec
		return dec, nil
	}
	return w.dec, w.dec.Reset(src)
}

func (w *worker) close() {
	if w.dec != nil {
		w.dec.Close()
	}
	for _, f := range w.packs {
		f.Close()
	}
}

// readObject decompresses object sum into dst, checking that it has
// exactly size bytes and hashes to sum. dst may have received bytes when
// it fails; callers write into a private place they discard on error.
func (s *Store) readObject(w *worker, sum string, size int64, dst io.Writer) error {
	h := sha256.New()
	var n int64
	if loc, ok := s.lookupPacked(sum); ok {
		comp, err := s.readPacked(w, loc)
		if err != nil {
			return err
		}
		if n, err = w.decodeSmall(sum, comp, h, dst, size); err != nil {
			return err
		}
	} else {
		f, err := openRaw(s.objectPath(sum), unix.O_RDONLY, 0)
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%w: object %s is missing", ErrCorrupt, short(sum))
		}
		if err != nil {
			return fmt.Errorf("open object %s: %w", short(sum), err)
		}
		defer f.Close()
		if size <= smallObject {
			// A zstd frame of incompressible data is a little larger than
			// it; anything far larger is not an object of this size.
			limit := size + size/8 + 1024
			comp, err := io.ReadAll(io.LimitReader(f, limit+1))
			if err != nil {
				return fmt.Errorf("read object %s: %w", short(sum), err)
			}
			if int64(len(comp)) > limit {
				return fmt.Errorf("%w: object %s is too large for %d bytes", ErrCorrupt, short(sum), size)
			}
			if n, err = w.decodeSmall(sum, comp, h, dst, size); err != nil {
				return err
			}
		} else {
			dec, err := w.streamDecoder(f)
			if err != nil {
				return fmt.Errorf("%w: object %s: %v", ErrCorrupt, short(sum), err)
			}
			ew := &errWriter{w: dst}
			n, err = io.CopyBuffer(io.MultiWriter(h, ew), io.LimitReader(dec, size+1), w.buf)
			if ew.err != nil {
				return ew.err
			}
			if err != nil {
				return fmt.Errorf("%w: object %s does not decompress: %v", ErrCorrupt, short(sum), err)
			}
		}
	}
	if n != size {
		return fmt.Errorf("%w: object %s has %d bytes, want %d", ErrCorrupt, short(sum), n, size)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sum {
		return fmt.Errorf("%w: object %s hashes to %s", ErrCorrupt, short(sum), short(got))
	}
	return nil
}

// decodeSmall decompresses a whole object in memory, hashes it, and
// writes it to dst when it has the expected size.
func (w *worker) decodeSmall(sum string, comp []byte, h io.Writer, dst io.Writer, size int64) (int64, error) {
	_, dec, err := codecs()
	if err != nil {
		return 0, err
	}
	w.out, err = dec.DecodeAll(comp, w.out[:0])
	if err != nil {
		return 0, fmt.Errorf("%w: object %s does not decompress: %v", ErrCorrupt, short(sum), err)
	}
	h.Write(w.out)
	if int64(len(w.out)) == size {
		if _, err := dst.Write(w.out); err != nil {
			return 0, err
		}
	}
	return int64(len(w.out)), nil
}

// errWriter remembers its writer's error, to tell a failed write (a full
// disk) from a failed read (a corrupt object) after an io.Copy.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	n, err := e.w.Write(p)
	if err != nil {
		e.err = err
	}
	return n, err
}
