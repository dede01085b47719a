package remote

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/coder/websocket"

	"github.com/agentbox/agentbox/internal/outpipe"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/server/api"
)

// outputWindow is how much of one stream's output the client holds
// unread before it stops taking more from the connection. The server
// queues about as much again, then the command blocks in its next write,
// as with a pipe.
const outputWindow = 1 << 20

// stdinChunk is the most standard input one message carries (the
// server's read limit is a little above).
const stdinChunk = 32 << 10

// Start starts a command on the server and streams it over a WebSocket.
// Output is delivered as the caller reads it: a stream nobody reads holds
// the others back, as a pipe would, but never a Kill or the exit after
// it.
func (s *session) Start(ctx context.Context, req sandbox.ExecRequest) (sandbox.Process, error) {
	if err := s.live("start"); err != nil {
		return nil, err
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	return s.c.stream(ctx, s.path("/processes"), &req)
}

// Attach reattaches to a process started with detach (see the server's
// stream protocol).
func (c *Client) Attach(ctx context.Context, sessionID, processID string) (sandbox.Process, error) {
	return c.stream(ctx, "/v1/sessions/"+sessionID+"/processes/"+processID, nil)
}

// stream dials path and, for a start, sends req.
func (c *Client) stream(ctx context.Context, path string, req *sandbox.ExecRequest) (sandbox.Process, error) {
	op := "remote: start"
	if req == nil {
		op = "remote: attach"
	}
	h := http.Header{}
	h.Set("Authorization", "Bearer "+c.token)
	// The connection outlives Start's context (the process runs on);
	// only the handshake is bounded.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dialTimeout)
	stopOnCancel := context.AfterFunc(ctx, cancel)
	conn, resp, err := websocket.Dial(dctx, c.base+path, &websocket.DialOptions{HTTPClient: c.hc, HTTPHeader: h})
	stopOnCancel()
	cancel()
	if err != nil {
		if resp != nil && resp.StatusCode >= 400 {
			return nil, decodeError(op, resp)
		}
		return nil, &sandbox.Error{Op: op, Kind: sandbox.ErrUnavailable, Err: err, Retryable: true}
	}
	conn.SetReadLimit(1 << 20)
	bg := context.Background()
	if req != nil {
		e := api.FromRequest(*req)
		if err := writeJSON(bg, conn, e); err != nil {
			conn.CloseNow()
			return nil, &sandbox.Error{Op: op, Kind: sandbox.ErrUnavailable, Err: err}
		}
	}
	var ev api.Event
	if err := readEvent(bg, conn, &ev); err != nil {
		conn.CloseNow()
		return nil, &sandbox.Error{Op: op, Kind: sandbox.ErrUnavailable, Err: err}
	}
	if ev.Type == api.EventError && ev.Error != nil {
		conn.CloseNow()
		return nil, fromBody(op, *ev.Error)
	}
	if ev.Type != api.EventStarted {
		conn.CloseNow()
		return nil, &sandbox.Error{Op: op, Kind: sandbox.ErrUnavailable, Err: errors.New("the server did not say the process started")}
	}
	p := newProcess(conn, ev.Process)
	if req != nil && req.Stdin != nil {
		sandbox.FeedStdin(p, req.Stdin)
	}
	return p, nil
}

// process is a command running on the server.
type process struct {
	id   string
	conn *websocket.Conn

	stdout, stderr *outpipe.Pipe
	stdin          *stdin

	seq  atomic.Uint64
	mu   sync.Mutex
	acks map[uint64]chan error

	done   chan struct{}
	status sandbox.ExitStatus
	err    error
	once   sync.Once
}

func newProcess(conn *websocket.Conn, id string) *process {
	p := &process{id: id, conn: conn, acks: map[uint64]chan error{}, done: make(chan struct{})}
	p.stdout, p.stderr = outpipe.New(outputWindow), outpipe.New(outputWindow)
	p.stdin = &stdin{p: p}
	go p.read()
	return p
}

// ID names the process on the server, for Client.Attach.
func (p *process) ID() string { return p.id }

// read receives output and events until the exit or the connection's end.
func (p *process) read() {
	ctx := context.Background()
	end := func(st sandbox.ExitStatus, err error) {
		p.status, p.err = st, err
		p.stdout.End()
		p.stderr.End()
		p.mu.Lock()
		for seq, ch := range p.acks {
			ch <- sandbox.Errorf(sandbox.ErrClosed, "remote: the process ended")
			delete(p.acks, seq)
		}
		p.mu.Unlock()
		close(p.done)
	}
	for {
		typ, data, err := p.conn.Read(ctx)
		if err != nil {
			end(sandbox.ExitStatus{}, &sandbox.Error{Op: "remote: process " + p.id, Kind: sandbox.ErrUnavailable, Err: errors.New("the connection to the server ended before the process did: " + err.Error())})
			return
		}
		if typ == websocket.MessageBinary {
			if len(data) == 0 {
				continue
			}
			o := p.stdout
			if data[0] == api.StreamStderr {
				o = p.stderr
			}
			_, _ = o.Write(data[1:]) // a reader that closed its end drops output
			continue
		}
		var ev api.Event
		if err := json.Unmarshal(data, &ev); err != nil {
			continue
		}
		switch ev.Type {
		case api.EventAck:
			p.mu.Lock()
			ch, ok := p.acks[ev.Seq]
			delete(p.acks, ev.Seq)
			p.mu.Unlock()
			if ok {
				var e error
				if ev.Error != nil {
					e = fromBody("remote: process "+p.id, *ev.Error)
				}
				ch <- e
			}
		case api.EventExit:
			st := sandbox.ExitStatus{}
			if ev.Status != nil {
				st = *ev.Status
			}
			end(st, nil)
			p.conn.Close(websocket.StatusNormalClosure, "")
			return
		case api.EventError:
			var e error = sandbox.Errorf(nil, "remote: process %s failed", p.id)
			if ev.Error != nil {
				e = fromBody("remote: process "+p.id, *ev.Error)
			}
			end(sandbox.ExitStatus{}, e)
			p.conn.CloseNow()
			return
		}
	}
}

// control sends a control message and waits for its answer.
func (p *process) control(ctx context.Context, m api.Control) error {
	m.Seq = p.seq.Add(1)
	ch := make(chan error, 1)
	p.mu.Lock()
	p.acks[m.Seq] = ch
	p.mu.Unlock()
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := writeJSON(ctx, p.conn, m); err != nil {
		select {
		case <-p.done:
			return nil // it ended meanwhile: nothing left to control
		default:
		}
		return &sandbox.Error{Op: "remote: " + m.Type, Kind: sandbox.ErrUnavailable, Err: err}
	}
	select {
	case err := <-ch:
		if errors.Is(err, sandbox.ErrClosed) {
			return nil
		}
		return err
	case <-p.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *process) Stdin() io.WriteCloser { return p.stdin }
func (p *process) Stdout() io.Reader     { return p.stdout }
func (p *process) Stderr() io.Reader     { return p.stderr }

func (p *process) Resize(ctx context.Context, rows, cols uint16) error {
	return p.control(ctx, api.Control{Type: api.ControlResize, Rows: rows, Cols: cols})
}

// Kill asks the server to kill the command and waits for its answer,
// which, like the exit, arrives behind the output the server queued: the
// output is taken in whole meanwhile, read or not (see outpipe).
func (p *process) Kill(ctx context.Context) error {
	p.stdout.Drain(true)
	p.stderr.Drain(true)
	err := p.control(ctx, api.Control{Type: api.ControlKill})
	if err != nil && ctx.Err() == nil {
		// The server refused: the command may still run, and its
		// output is held back again.
		p.stdout.Drain(false)
		p.stderr.Drain(false)
	}
	return err
}

func (p *process) Wait(ctx context.Context) (sandbox.ExitStatus, error) {
	select {
	case <-p.done:
		return p.status, p.err
	case <-ctx.Done():
		return sandbox.ExitStatus{}, ctx.Err()
	}
}

// Close drops the connection; the server kills a process whose client
// goes away (unless it was started to detach).
func (p *process) Close() error {
	p.once.Do(func() {
		p.conn.CloseNow()
		p.stdout.Close()
		p.stderr.Close()
	})
	return nil
}

// stdin sends standard input as binary messages; Close sends EOF.
type stdin struct {
	p      *process
	mu     sync.Mutex
	closed bool
}

func (s *stdin) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, errors.New("remote: write to closed standard input")
	}
	n := 0
	for len(b) > 0 {
		chunk := b[:min(len(b), stdinChunk)]
		if err := s.p.conn.Write(context.Background(), websocket.MessageBinary, chunk); err != nil {
			return n, err
		}
		n += len(chunk)
		b = b[len(chunk):]
	}
	return n, nil
}

func (s *stdin) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	err := writeJSON(context.Background(), s.p.conn, api.Control{Type: api.ControlCloseStdin})
	select {
	case <-s.p.done:
		return nil
	default:
		return err
	}
}

func writeJSON(ctx context.Context, c *websocket.Conn, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return c.Write(ctx, websocket.MessageText, data)
}

func readEvent(ctx context.Context, c *websocket.Conn, ev *api.Event) error {
	typ, data, err := c.Read(ctx)
	if err != nil {
		return err
	}
	if typ != websocket.MessageText {
		return errors.New("the server sent output before saying the process started")
	}
	return json.NewDecoder(strings.NewReader(string(data))).Decode(ev)
}
