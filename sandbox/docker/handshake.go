package docker

// The start handshake: the wrapper's first line (tag, pid, start time)
// is taken off the command's output and kept in memory, and, without a
// terminal, the wrapper execs the command only after the go-ahead on
// stdin (see wrapperScript).

import (
	"bytes"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/client"
)

// settle takes the wrapper's first line (nil if the stream ended before
// one) and reports whether it was that line. Without a terminal it sends
// the go-ahead, unless Kill came first.
func (p *process) settle(line []byte) bool {
	pid, started, ok := parseMarker(line, p.tag)
	p.launchMu.Lock()
	defer p.launchMu.Unlock()
	if p.launch != launchPending {
		return ok
	}
	switch {
	case ok && (p.tty || !p.killed.Load()):
		p.launch, p.pid, p.started = launchRunning, pid, started
	case p.tty:
		p.launch = launchUnknown
	default:
		// Killed already, or not the wrapper speaking (the engine's
		// own error): the command must not start.
		p.launch = launchRefused
		if !p.killed.Load() {
			p.unstarted = unstartedWhy(line)
		}
	}
	_ = p.stdin.settle(p.launch != launchRefused, p.launch == launchRunning && !p.tty)
	return ok
}

// maxUnstarted bounds what an error quotes of an exec's output in place
// of the wrapper's line (the engine's error runs to a few hundred bytes).
const maxUnstarted = 512

// unstartedWhy says why a command whose wrapper never printed its line
// did not start: line is what came instead (nil: nothing did), most often
// the engine's own error for an exec it could not start.
func unstartedWhy(line []byte) string {
	got := strings.TrimSpace(string(line))
	if got == "" {
		return "the exec's output ended before the wrapper's first line"
	}
	if len(got) > maxUnstarted {
		got = got[:maxUnstarted] + "..."
	}
	return "the exec printed " + strconv.Quote(got) + " instead of the wrapper's first line"
}

// notStarted is why the command never ran, or "" when it ran or may
// have: without a terminal, a wrapper that did not print its line was
// refused its go-ahead (and, if no Kill came first, that was not
// agentbox's doing). unknown is a terminal exec whose line never came
// and which no Kill stopped: the command may have flushed the line, or
// never run.
func (p *process) notStarted() (why string, unknown bool) {
	p.launchMu.Lock()
	defer p.launchMu.Unlock()
	return p.unstarted, p.tty && p.launch == launchUnknown && !p.killed.Load()
}

// hold stops a start that has not had its go-ahead and returns where the
// start stands.
func (p *process) hold() (state, pid int, started string) {
	p.launchMu.Lock()
	defer p.launchMu.Unlock()
	if p.launch == launchPending && !p.tty {
		p.launch = launchRefused
		_ = p.stdin.settle(false, false)
	}
	return p.launch, p.pid, p.started
}

// parseMarker reads "<tag> <pid> <starttime>", the wrapper's first line.
func parseMarker(line []byte, tag string) (pid int, started string, ok bool) {
	f := strings.Fields(string(line))
	if len(f) != 3 || f[0] != tag {
		return 0, "", false
	}
	pid, err := strconv.Atoi(f[1])
	if err != nil || pid <= 1 {
		return 0, "", false
	}
	if _, err := strconv.ParseUint(f[2], 10, 64); err != nil {
		return 0, "", false
	}
	return pid, f[2], true
}

// firstLine holds back the start of a stream until its first line is
// complete, hands that line to take and drops it if take says it was the
// wrapper's; everything else passes through to dst.
type firstLine struct {
	dst  io.Writer
	take func([]byte) bool
	buf  []byte
	done bool
}

func (f *firstLine) Write(b []byte) (int, error) {
	if f.done {
		return f.dst.Write(b)
	}
	f.buf = append(f.buf, b...)
	i := bytes.IndexByte(f.buf, '\n')
	if i < 0 && len(f.buf) <= maxMarker {
		return len(b), nil
	}
	f.done = true
	rest := f.buf
	if i >= 0 && f.take(f.buf[:i]) {
		rest = f.buf[i+1:]
	} else if i < 0 {
		f.take(nil)
	}
	f.buf = nil
	if len(rest) > 0 {
		if _, err := f.dst.Write(rest); err != nil {
			return 0, err
		}
	}
	return len(b), nil
}

// flush passes on what is held when the stream ends and reports whether
// the first line never came (then take has not been called).
func (f *firstLine) flush() bool {
	if f.done {
		return false
	}
	f.done = true
	if len(f.buf) > 0 {
		_, _ = f.dst.Write(f.buf)
	}
	return true
}

// stdinWriter is the command's standard input. Writes wait until the
// start is settled (so nothing typed reaches the wrapper, nor echoes on a
// terminal before its line). Close half-closes the attach connection, so
// the command sees EOF while its output keeps flowing; with a terminal it
// types the EOF character (^D) instead, as a user would: the engine tears
// down a TTY exec's output when its input half-closes.
//
// A command that does not read its input fills the pipe and the socket
// behind it, and a Write then blocks in the connection. Close does not
// wait for such a Write: it aborts it (a write deadline in the past), and
// the Write, on its way out, closes the input. No Write or Close holds
// mu while it blocks on the connection, except the ^D, which is bounded.
type stdinWriter struct {
	conn  *client.HijackedResponse
	tty   bool
	ready chan struct{} // closed by settle
	gone  chan struct{} // closed by Close: Writes waiting for ready give up

	wmu sync.Mutex // one Write on the connection at a time

	mu      sync.Mutex
	settled bool
	open    bool // the command runs (or may): writes go to it
	closed  bool // Close was called
	shut    bool // the input is closed
	writing bool // a Write is on the connection
}

// newStdinWriter is the command's input over conn.
func newStdinWriter(conn *client.HijackedResponse, tty bool) *stdinWriter {
	return &stdinWriter{conn: conn, tty: tty, ready: make(chan struct{}), gone: make(chan struct{})}
}

// eofWait bounds the ^D that closes a terminal's input: the terminal may
// be full of input the command never read.
const eofWait = 2 * time.Second

func (w *stdinWriter) Write(b []byte) (int, error) {
	select {
	case <-w.ready:
	case <-w.gone:
		return 0, io.ErrClosedPipe
	}
	w.wmu.Lock()
	defer w.wmu.Unlock()
	w.mu.Lock()
	if w.closed || !w.open {
		w.mu.Unlock()
		return 0, io.ErrClosedPipe
	}
	w.writing = true
	w.mu.Unlock()
	n, err := w.conn.Conn.Write(b)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writing = false
	if w.closed {
		// Close came while this Write was on the connection and may
		// have aborted it; the input is this Write's to close.
		_ = w.conn.Conn.SetWriteDeadline(time.Time{})
		_ = w.shutLocked()
		if err != nil {
			err = io.ErrClosedPipe
		}
	}
	return n, err
}

func (w *stdinWriter) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	close(w.gone)
	if !w.settled {
		return nil // settle closes it, after the go-ahead
	}
	if w.writing {
		// The Write closes the input when it returns.
		return w.conn.Conn.SetWriteDeadline(time.Now())
	}
	return w.shutLocked()
}

// settle ends the wait of the writes: open says whether the command may
// get its input, goAhead sends the wrapper its "go" line first. Input
// that is not to be used is closed (the wrapper reads EOF and dies).
func (w *stdinWriter) settle(open, goAhead bool) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.settled {
		return nil
	}
	w.settled, w.open = true, open
	defer close(w.ready)
	var err error
	if goAhead {
		// Nothing was written before: the pipe has room for it.
		_, err = w.conn.Conn.Write([]byte("go\n"))
	}
	if !open || w.closed {
		if cerr := w.shutLocked(); err == nil {
			err = cerr
		}
	}
	return err
}

func (w *stdinWriter) shutLocked() error {
	if w.shut {
		return nil
	}
	w.shut = true
	if w.tty {
		_ = w.conn.Conn.SetWriteDeadline(time.Now().Add(eofWait))
		_, err := w.conn.Conn.Write([]byte{4})
		_ = w.conn.Conn.SetWriteDeadline(time.Time{})
		return err
	}
	return w.conn.CloseWrite()
}
