package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/agentbox/agentbox/server/api"
)

// wsClient is a test's side of an exec stream, speaking the protocol
// directly.
type wsClient struct {
	t    *testing.T
	c    *websocket.Conn
	proc string
	out  strings.Builder
}

// dial opens path with key tok and, when e is set, starts it.
func (ts *testServer) dial(t *testing.T, tok, path string, e *api.Exec) *wsClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h := http.Header{"Authorization": {"Bearer " + tok}}
	c, _, err := websocket.Dial(ctx, ts.url+path, &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		t.Fatalf("dial %s: %v", path, err)
	}
	w := &wsClient{t: t, c: c}
	if e != nil {
		w.send(e)
	}
	ev := w.event()
	if ev.Type != api.EventStarted {
		t.Fatalf("first event %+v, want started", ev)
	}
	w.proc = ev.Process
	return w
}

func (w *wsClient) send(v any) {
	w.t.Helper()
	data, _ := json.Marshal(v)
	if err := w.c.Write(context.Background(), websocket.MessageText, data); err != nil {
		w.t.Fatal(err)
	}
}

// event reads until the next event, collecting output on the way.
func (w *wsClient) event() api.Event {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		typ, data, err := w.c.Read(ctx)
		if err != nil {
			w.t.Fatalf("read: %v (output so far %q)", err, w.out.String())
		}
		if typ == websocket.MessageBinary {
			w.out.Write(data[1:])
			continue
		}
		var ev api.Event
		if err := json.Unmarshal(data, &ev); err != nil {
			w.t.Fatal(err)
		}
		return ev
	}
}

// waitOutput reads until the output holds s.
func (w *wsClient) waitOutput(s string) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for !strings.Contains(w.out.String(), s) {
		typ, data, err := w.c.Read(ctx)
		if err != nil {
			w.t.Fatalf("waiting for %q: %v (output %q)", s, err, w.out.String())
		}
		if typ == websocket.MessageBinary {
			w.out.Write(data[1:])
		}
	}
}

// processes lists the commands running in a session (from /proc, as the
// sandbox sees it).
func (ts *testServer) processes(t *testing.T, tok, id string) string {
	t.Helper()
	var res api.ExecResult
	ts.ok(t, tok, "POST", "/v1/sessions/"+id+"/exec", api.Exec{Cmd: []string{"sh", "-c", "cat /proc/[0-9]*/cmdline | tr '\\0' ' '"}}, http.StatusOK, &res)
	return string(res.Stdout)
}

func TestAProcessWhoseClientGoesAwayIsKilled(t *testing.T) {
	ts := newTestServer(t, Config{})
	tok := ts.key(t, "acme")
	s := ts.createSession(t, tok)
	w := ts.dial(t, tok, "/v1/sessions/"+s.ID+"/processes", &api.Exec{Cmd: []string{"sh", "-c", "echo started; exec sleep 4242"}})
	w.waitOutput("started")
	if !strings.Contains(ts.processes(t, tok, s.ID), "sleep 4242") {
		t.Fatal("the streamed command is not running")
	}
	w.c.CloseNow()
	deadline := time.Now().Add(10 * time.Second)
	for strings.Contains(ts.processes(t, tok, s.ID), "sleep 4242") {
		if time.Now().After(deadline) {
			t.Fatal("the command still runs 10s after its client went away")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestADetachedProcessOutlivesItsClientAndIsReattached(t *testing.T) {
	ts := newTestServer(t, Config{})
	tok, other := ts.key(t, "acme"), ts.key(t, "other")
	s := ts.createSession(t, tok)
	w := ts.dial(t, tok, "/v1/sessions/"+s.ID+"/processes?detach=1", &api.Exec{
		Cmd: []string{"sh", "-c", "sleep 0.5; echo while-detached; read x; echo got $x; exit 7"}})
	w.c.CloseNow()
	time.Sleep(time.Second)

	path := "/v1/sessions/" + s.ID + "/processes/" + w.proc
	ts.refused(t, other, "GET", path, nil, http.StatusNotFound, api.KindNotFound)
	back := ts.dial(t, tok, path, nil)
	back.waitOutput("while-detached")
	if err := back.c.Write(context.Background(), websocket.MessageBinary, []byte("hi\n")); err != nil {
		t.Fatal(err)
	}
	ev := back.event()
	if ev.Type != api.EventExit || ev.Status == nil || ev.Status.ExitCode != 7 {
		t.Fatalf("event %+v, want exit 7", ev)
	}
	if !strings.Contains(back.out.String(), "got hi") {
		t.Fatalf("output after the reattach %q, want the answer to its input", back.out.String())
	}
	// Once its exit is delivered the process is gone.
	ts.refused(t, tok, "GET", path, nil, http.StatusNotFound, api.KindNotFound, w.proc)
}

func TestKillAndResizeAreAcknowledged(t *testing.T) {
	ts := newTestServer(t, Config{})
	tok := ts.key(t, "acme")
	s := ts.createSession(t, tok)
	w := ts.dial(t, tok, "/v1/sessions/"+s.ID+"/processes", &api.Exec{Cmd: []string{"sh", "-c", "stty size; echo ready; read x; stty size; sleep 100"}, TTY: true, Rows: 24, Cols: 80})
	w.waitOutput("ready")
	w.send(api.Control{Type: api.ControlResize, Seq: 1, Rows: 40, Cols: 120})
	if ev := w.event(); ev.Type != api.EventAck || ev.Seq != 1 || ev.Error != nil {
		t.Fatalf("resize answered %+v", ev)
	}
	if err := w.c.Write(context.Background(), websocket.MessageBinary, []byte("\n")); err != nil {
		t.Fatal(err)
	}
	w.waitOutput("40 120")
	w.send(api.Control{Type: api.ControlKill, Seq: 2})
	for {
		ev := w.event()
		if ev.Type == api.EventAck {
			continue
		}
		if ev.Type != api.EventExit || ev.Status.ExitCode != 137 {
			t.Fatalf("after kill: %+v", ev)
		}
		break
	}
	if !strings.HasPrefix(strings.TrimSpace(w.out.String()), "24 80") {
		t.Errorf("the terminal did not start at 24x80: %q", w.out.String())
	}
}
