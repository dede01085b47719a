package trace

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Writer appends events to a JSONL trace. It is safe for concurrent use;
// every event is written and flushed (and fsynced for files) before Emit
// returns.
type Writer struct {
	mu      sync.Mutex
	w       *bufio.Writer
	file    *os.File
	closer  io.Closer
	runID   string
	traceID string
	seq     int64
	spans   *spanExporter
	redact  *Redactor
	err     error
	now     func() time.Time
}

// Create opens (truncating) a trace file at path.
func Create(path string) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("trace: create %s: %w", path, err)
	}
	w := New(f)
	w.file = f
	w.closer = f
	return w, nil
}

// New writes a trace to w. The caller keeps ownership of w.
func New(w io.Writer) *Writer {
	return &Writer{
		w:       bufio.NewWriter(w),
		runID:   newID(8),
		traceID: newID(16),
		redact:  defaultRedactor(),
		now:     time.Now,
	}
}

// Redactor is what hides secrets in this writer's events: DefaultPatterns
// until more are added. Add the credentials a run holds before its first
// event.
func (w *Writer) Redactor() *Redactor {
	if w == nil {
		return nil
	}
	return w.redact
}

// RunID identifies the run this writer records (16 hex digits).
func (w *Writer) RunID() string {
	if w == nil {
		return ""
	}
	return w.runID
}

// TraceID identifies the trace (32 hex digits, an OpenTelemetry trace id).
func (w *Writer) TraceID() string {
	if w == nil {
		return ""
	}
	return w.traceID
}

// Emit stamps e with the time, ids and sequence number and writes it. A
// write failure is kept and returned by later calls and by Close; a nil
// Writer ignores events.
func (w *Writer) Emit(e Event) error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if e.Time.IsZero() {
		e.Time = w.now().UTC()
	}
	w.seq++
	e.Seq = w.seq
	e.RunID = w.runID
	e.TraceID = w.traceID
	scrub(&e, w.redact)
	if w.spans != nil {
		w.spans.observe(e)
	}
	if w.err != nil {
		return w.err
	}
	line, err := json.Marshal(e)
	if err != nil {
		w.err = fmt.Errorf("trace: encode %s event: %w", e.Type, err)
		return w.err
	}
	line = append(line, '\n')
	if _, err := w.w.Write(line); err != nil {
		w.err = fmt.Errorf("trace: write %s event: %w", e.Type, err)
		return w.err
	}
	if err := w.w.Flush(); err != nil {
		w.err = fmt.Errorf("trace: flush %s event: %w", e.Type, err)
		return w.err
	}
	if w.file != nil && (e.Type == RunEnd || e.Type == Error) {
		// A crash after an error or the end must not lose the reason.
		_ = w.file.Sync()
	}
	return nil
}

// Close flushes the span exporter (if any) and closes the file that
// Create opened. It reports the first write error.
func (w *Writer) Close() error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	err := w.err
	if w.spans != nil {
		if serr := w.spans.shutdown(); serr != nil && err == nil {
			err = serr
		}
		w.spans = nil
	}
	if w.closer != nil {
		if cerr := w.closer.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("trace: close: %w", cerr)
		}
		w.closer = nil
	}
	return err
}

func newID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
