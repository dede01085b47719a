// Package outpipe is the output stream of a command whose output reaches
// the client over a connection it shares with other news of the command
// (the answer to a kill, the exit): a pipe with a window, whose writer can
// be told to stop waiting.
//
// The writer (the reader of the connection) appends what arrives; the
// caller reads it. Past the window of unread bytes the writer waits for
// the caller, so a command whose output nobody reads is held back, as by a
// pipe. But what comes behind that output on the connection is held back
// too, and a Kill would wait forever for its answer, and Wait for the
// exit. While a Kill is under way (Drain), appends therefore never wait:
// the killed command's output is finite, and it is kept, in order, for a
// caller that reads it later.
package outpipe

import (
	"io"
	"sync"
)

// Pipe is one output stream; see the package comment.
type Pipe struct {
	window   int
	mu       sync.Mutex
	cond     sync.Cond
	buf      []byte
	ended    bool // the writer ended: EOF once buf is read
	closed   bool // the caller closed its end: appends are dropped
	draining int  // Drains under way
}

// New is a pipe that holds up to window unread bytes before Write waits.
func New(window int) *Pipe {
	o := &Pipe{window: window}
	o.cond.L = &o.mu
	return o
}

// Write appends b, waiting while the window is full and no Drain is
// under way. Once the caller closed its end, b is dropped (as a command's
// output is when its reader is gone); Write never fails.
func (o *Pipe) Write(b []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for len(o.buf) >= o.window && o.draining == 0 && !o.closed {
		o.cond.Wait()
	}
	if !o.closed {
		o.buf = append(o.buf, b...)
		o.cond.Broadcast()
	}
	return len(b), nil
}

// End marks the end of the stream: a reader gets EOF once it has read
// what is held.
func (o *Pipe) End() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ended = true
	o.cond.Broadcast()
}

// Drain lets appends past the window (on), for a Kill, or ends that
// (off); each on is matched by at most one off.
func (o *Pipe) Drain(on bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if on {
		o.draining++
	} else {
		o.draining--
	}
	o.cond.Broadcast()
}

func (o *Pipe) Read(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for len(o.buf) == 0 && !o.ended && !o.closed {
		o.cond.Wait()
	}
	switch {
	case o.closed:
		return 0, io.ErrClosedPipe
	case len(o.buf) == 0:
		return 0, io.EOF
	}
	n := copy(p, o.buf)
	o.buf = o.buf[n:]
	if len(o.buf) == 0 {
		o.buf = nil // let a large drained buffer go
	}
	o.cond.Broadcast()
	return n, nil
}

// Close drops what is held and what comes later.
func (o *Pipe) Close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed = true
	o.buf = nil
	o.cond.Broadcast()
	return nil
}
