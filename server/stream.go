package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/server/api"
)

// A streamed process outlives its WebSocket only when the request asked
// to detach (?detach=1): then a client that goes away leaves it running,
// its output waiting (a bounded queue, after which the process blocks on
// its next write) until a client reattaches. Otherwise the process is
// killed when its client goes away.

// outQueue is how many output messages a process queues while nobody
// reads them; each holds at most outChunk bytes.
const (
	outQueue = 64
	outChunk = 32 << 10
)

// proc is a streamed process.
type proc struct {
	id     string
	p      sandbox.Process
	detach bool
	// out carries output messages (tagged) and, last, the exit event;
	// it is closed after the exit event.
	out chan frame

	mu       sync.Mutex
	attached bool
	// held is a message taken from out whose write failed: the next
	// attachment sends it first.
	held *frame

	owner    *processes
	released chan struct{}
	once     sync.Once

	// exited, when set, is told how the process ended (for metrics).
	exited func(sandbox.ExitStatus)
}

// release kills nothing but lets go of the process: its streams and
// terminal are closed (which kills it if it still runs, see
// sandbox.Process.Close), its pump stops, it leaves the session's table.
func (p *proc) release() {
	p.once.Do(func() {
		close(p.released)
		_ = p.p.Close()
		p.owner.remove(p.id)
	})
}

// queue puts f in p.out unless the process was released.
func (p *proc) queue(f frame) bool {
	select {
	case p.out <- f:
		return true
	case <-p.released:
		return false
	}
}

// frame is an output message, or the exit event when ev is set.
type frame struct {
	data []byte
	ev   *api.Event
}

// processes are a session's streamed processes by id.
type processes struct {
	mu sync.Mutex
	m  map[string]*proc
}

func (ps *processes) add(p *proc) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.m == nil {
		ps.m = map[string]*proc{}
	}
	ps.m[p.id] = p
}

func (ps *processes) get(id string) (*proc, bool) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p, ok := ps.m[id]
	return p, ok
}

func (ps *processes) remove(id string) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	delete(ps.m, id)
}

func (ps *processes) count() int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return len(ps.m)
}

// killAll kills and releases every process (the session is ending).
func (ps *processes) killAll(ctx context.Context) {
	ps.mu.Lock()
	all := ps.m
	ps.m = nil
	ps.mu.Unlock()
	for _, p := range all {
		_ = p.p.Kill(ctx)
		p.release()
	}
}

// detachAll forgets every process without killing it (the server is
// going away and leaves the session running).
func (l *live) detachAll() {
	l.procs.mu.Lock()
	l.procs.m = nil
	l.procs.mu.Unlock()
}

// handleStart upgrades to a WebSocket, reads the Exec, starts it and
// streams it.
func (s *Server) handleStart(w http.ResponseWriter, r *http.Request, t *tenant) error {
	l, sess, err := s.use(t, r.PathValue("id"))
	if err != nil {
		return err
	}
	detach := r.URL.Query().Get("detach") == "1"
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return nil // Accept answered the client
	}
	c.SetReadLimit(outChunk + 1<<10)
	ctx := context.WithoutCancel(r.Context())
	var req api.Exec
	if err := wsReadJSON(ctx, c, &req); err != nil {
		wsFail(ctx, c, sandbox.Errorf(sandbox.ErrInvalid, "the first message is the exec request: %v", err))
		return nil
	}
	if req.Stdin != nil {
		wsFail(ctx, c, sandbox.Errorf(sandbox.ErrInvalid, "a stream sends its standard input as binary messages, not in the exec request"))
		return nil
	}
	er := req.Request()
	if err := er.Validate(); err != nil {
		wsFail(ctx, c, err)
		return nil
	}
	sp, err := sess.Start(ctx, er)
	if err != nil {
		wsFail(ctx, c, s.checked(l, err))
		return nil
	}
	start := time.Now()
	p := &proc{id: newProcID(), p: sp, detach: detach, out: make(chan frame, outQueue), attached: true,
		owner: &l.procs, released: make(chan struct{}),
		exited: func(st sandbox.ExitStatus) {
			s.observe(t, time.Since(start), len(st.Violations))
			l.emit(execEvent("stream", req.Cmd, st, time.Since(start)))
		}}
	l.procs.add(p)
	go p.pump()
	if err := wsWriteJSON(ctx, c, api.Event{Type: api.EventStarted, Process: p.id}); err != nil {
		p.disconnected(ctx)
		return nil
	}
	s.streams.Add(1)
	defer s.streams.Done()
	p.serve(ctx, c)
	return nil
}

// handleAttach reattaches to a detached process.
func (s *Server) handleAttach(w http.ResponseWriter, r *http.Request, t *tenant) error {
	l, _, err := s.use(t, r.PathValue("id"))
	if err != nil {
		return err
	}
	p, ok := l.procs.get(r.PathValue("pid"))
	if !ok {
		return sandbox.Errorf(sandbox.ErrNotFound, "process %q not found in session %s", r.PathValue("pid"), l.rec.State.ID)
	}
	p.mu.Lock()
	busy := p.attached
	if !busy {
		p.attached = true
	}
	p.mu.Unlock()
	if busy {
		return sandbox.Errorf(sandbox.ErrInvalid, "process %s already has a client attached", p.id)
	}
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		p.mu.Lock()
		p.attached = false
		p.mu.Unlock()
		return nil
	}
	c.SetReadLimit(outChunk + 1<<10)
	ctx := context.WithoutCancel(r.Context())
	if err := wsWriteJSON(ctx, c, api.Event{Type: api.EventStarted, Process: p.id}); err != nil {
		p.disconnected(ctx)
		return nil
	}
	s.streams.Add(1)
	defer s.streams.Done()
	p.serve(ctx, c)
	return nil
}

// pump copies the process's output into p.out, then waits for it and
// queues the exit event; once that is delivered the process is released.
func (p *proc) pump() {
	var wg sync.WaitGroup
	copyOut := func(tag byte, r io.Reader) {
		defer wg.Done()
		if r == nil {
			return
		}
		for {
			buf := make([]byte, outChunk+1)
			buf[0] = tag
			n, err := r.Read(buf[1:])
			if n > 0 && !p.queue(frame{data: buf[:n+1]}) {
				return
			}
			if err != nil {
				return
			}
		}
	}
	wg.Add(2)
	go copyOut(api.StreamStdout, p.p.Stdout())
	go copyOut(api.StreamStderr, p.p.Stderr())
	wg.Wait()
	st, err := p.p.Wait(context.Background())
	ev := &api.Event{Type: api.EventExit, Status: &st}
	if err == nil && p.exited != nil {
		p.exited(st)
	}
	if err != nil {
		_, kind := classify(err)
		ev = &api.Event{Type: api.EventError, Error: &api.ErrorBody{Kind: kind, Message: err.Error()}}
	}
	if p.queue(frame{ev: ev}) {
		close(p.out)
	}
}

// serve runs one attachment: client messages go to the process, output
// and the exit event to the client.
func (p *proc) serve(ctx context.Context, c *websocket.Conn) {
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		p.readClient(ctx, c)
	}()
	exited := p.writeClient(ctx, c, readDone)
	if exited {
		p.release()
		c.Close(websocket.StatusNormalClosure, "exited")
		return
	}
	p.disconnected(ctx)
	c.CloseNow()
}

// writeClient sends output until the exit event (true) or until the
// client goes away (false).
func (p *proc) writeClient(ctx context.Context, c *websocket.Conn, gone <-chan struct{}) bool {
	send := func(f frame) error {
		if f.ev != nil {
			// Gone from the table before the client hears of the exit,
			// back in it if the client does not.
			p.owner.remove(p.id)
			if err := wsWriteJSON(ctx, c, f.ev); err != nil {
				p.owner.add(p)
				return err
			}
			return nil
		}
		return c.Write(ctx, websocket.MessageBinary, f.data)
	}
	p.mu.Lock()
	held := p.held
	p.held = nil
	p.mu.Unlock()
	if held != nil {
		if err := send(*held); err != nil {
			p.hold(*held)
			return false
		}
		if held.ev != nil {
			return true
		}
	}
	for {
		select {
		case <-gone:
			return false
		case <-p.released:
			return true
		case f, ok := <-p.out:
			if !ok {
				return true
			}
			if err := send(f); err != nil {
				p.hold(f)
				return false
			}
			if f.ev != nil {
				return true
			}
		}
	}
}

func (p *proc) hold(f frame) {
	p.mu.Lock()
	p.held = &f
	p.mu.Unlock()
}

// disconnected is the client's going away: the process is killed unless
// it asked to detach.
func (p *proc) disconnected(ctx context.Context) {
	p.mu.Lock()
	p.attached = false
	p.mu.Unlock()
	if !p.detach {
		_ = p.p.Kill(ctx)
		p.release()
	}
}

// readClient handles the client's messages until it goes away or the
// connection closes.
func (p *proc) readClient(ctx context.Context, c *websocket.Conn) {
	for {
		typ, data, err := c.Read(ctx)
		if err != nil {
			return
		}
		if typ == websocket.MessageBinary {
			if _, err := p.p.Stdin().Write(data); err != nil {
				// The process closed its input or ended: further input
				// has nowhere to go, as with a pipe.
				continue
			}
			continue
		}
		var m api.Control
		if err := json.Unmarshal(data, &m); err != nil {
			p.ack(ctx, c, 0, sandbox.Errorf(sandbox.ErrInvalid, "control message: %v", err))
			continue
		}
		var cerr error
		switch m.Type {
		case api.ControlCloseStdin:
			cerr = p.p.Stdin().Close()
		case api.ControlResize:
			cerr = p.p.Resize(ctx, m.Rows, m.Cols)
		case api.ControlKill:
			cerr = p.p.Kill(ctx)
		default:
			cerr = sandbox.Errorf(sandbox.ErrInvalid, "control message type %q (want %s, %s or %s)", m.Type, api.ControlCloseStdin, api.ControlResize, api.ControlKill)
		}
		if m.Seq != 0 || cerr != nil {
			p.ack(ctx, c, m.Seq, cerr)
		}
	}
}

func (p *proc) ack(ctx context.Context, c *websocket.Conn, seq uint64, err error) {
	ev := api.Event{Type: api.EventAck, Seq: seq}
	if err != nil {
		_, kind := classify(err)
		ev.Error = &api.ErrorBody{Kind: kind, Message: err.Error()}
	}
	_ = wsWriteJSON(ctx, c, ev)
}

func wsReadJSON(ctx context.Context, c *websocket.Conn, v any) error {
	typ, data, err := c.Read(ctx)
	if err != nil {
		return err
	}
	if typ != websocket.MessageText {
		return errors.New("a binary message where a JSON text message was expected")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

func wsWriteJSON(ctx context.Context, c *websocket.Conn, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return c.Write(ctx, websocket.MessageText, data)
}

// wsFail sends an error event and closes the connection.
func wsFail(ctx context.Context, c *websocket.Conn, err error) {
	_, kind := classify(err)
	_ = wsWriteJSON(ctx, c, api.Event{Type: api.EventError, Error: &api.ErrorBody{Kind: kind, Message: err.Error(), Retryable: sandbox.IsRetryable(err)}})
	c.Close(websocket.StatusNormalClosure, "failed")
}

func newProcID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "p-" + hex.EncodeToString(b[:])
}

func fsMode(m uint64) fs.FileMode { return fs.FileMode(m) }

func readAll(r *http.Request) ([]byte, error) { return io.ReadAll(r.Body) }

// Drain waits until no client is attached to a streamed process, or ctx
// ends (the shutdown's grace period).
func (s *Server) Drain(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		s.streams.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
}
