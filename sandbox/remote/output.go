package remote

import (
	"io"
	"sync"
)

// outputWindow is how much of one stream's output the client holds
// unread before it stops taking more from the connection. The server
// queues about as much again, then the command blocks in its next write,
// as with a pipe.
const outputWindow = 1 << 20

// output is one output stream of a process on the client: the reader of
// the connection appends what the server sends, the caller reads it.
//
// The stream shares the connection with the answers to control messages
// and with the exit, which the server sends behind the output it has
// queued. So a caller that does not read holds those back too, and a Kill
// would wait forever for its answer, and Wait for the exit, behind output
// nobody reads. While a Kill is under way (draining), appends therefore
// never wait: the killed command's output is finite, and it is kept, in
// order, for a caller that reads it later.
type output struct {
	mu       sync.Mutex
	cond     sync.Cond
	buf      []byte
	ended    bool // the process ended: EOF once buf is read
	closed   bool // the caller closed its end: appends are dropped
	draining int  // Kills under way
}

func newOutput() *output {
	o := &output{}
	o.cond.L = &o.mu
	return o
}

// add appends b, waiting while the window is full and no Kill is under
// way.
func (o *output) add(b []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for len(o.buf) >= outputWindow && o.draining == 0 && !o.closed {
		o.cond.Wait()
	}
	if o.closed {
		return
	}
	o.buf = append(o.buf, b...)
	o.cond.Broadcast()
}

// end marks the end of the stream: a reader gets EOF once it has read
// what is held.
func (o *output) end() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ended = true
	o.cond.Broadcast()
}

// drain lets appends past the window (on) for a Kill, or ends that (off).
func (o *output) drain(on bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if on {
		o.draining++
	} else {
		o.draining--
	}
	o.cond.Broadcast()
}

func (o *output) Read(p []byte) (int, error) {
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
func (o *output) Close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed = true
	o.buf = nil
	o.cond.Broadcast()
	return nil
}
