package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/server/api"
	"github.com/agentbox/agentbox/trace"
)

// echoServer is a python3 HTTP server for a port test: /echo/... answers
// with the request's path and headers, anything else serves the
// workspace. It prints "listening" once bound.
const echoServer = `
import http.server, socketserver, sys
class H(http.server.SimpleHTTPRequestHandler):
    def do_GET(self):
        if not self.path.startswith("/echo"):
            return super().do_GET()
        body = ("path=" + self.path + "\n" + str(self.headers)).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
class S(socketserver.ThreadingMixIn, http.server.HTTPServer): daemon_threads = True
s = S(("127.0.0.1", int(sys.argv[1])), H)
print("listening", flush=True)
s.serve_forever()
`

// portSession is a session of tok exposing served and idle, with a server
// on served; hello.txt holds "hello from inside".
func (ts *testServer) portSession(t *testing.T, tok string) (id string, served, idle int) {
	t.Helper()
	served = 20000 + rand.IntN(20000)
	idle = served + 1
	var s api.Session
	ts.ok(t, tok, "POST", "/v1/sessions", api.CreateSession{Spec: sandbox.Spec{Ports: []int{served, idle}}}, http.StatusCreated, &s)
	ts.ok(t, tok, "PUT", "/v1/sessions/"+s.ID+"/files?path=hello.txt", "hello from inside\n", http.StatusNoContent, nil)
	w := ts.dial(t, tok, "/v1/sessions/"+s.ID+"/processes", &api.Exec{Cmd: []string{"python3", "-c", echoServer, strconv.Itoa(served)}})
	t.Cleanup(func() { w.c.CloseNow() })
	w.waitOutput("listening")
	return s.ID, served, idle
}

// dialPort opens the raw port route and returns the stream, or the
// status and body of a refusal.
func (ts *testServer) dialPort(t *testing.T, tok, id string, port any) (io.ReadWriteCloser, int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h := http.Header{"Authorization": {"Bearer " + tok}}
	c, resp, err := websocket.Dial(ctx, fmt.Sprintf("%s/v1/sessions/%s/ports/%v", ts.url, id, port), &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		if resp == nil {
			t.Fatalf("dial port %v: %v", port, err)
		}
		body, _ := io.ReadAll(resp.Body)
		return nil, resp.StatusCode, string(body)
	}
	return websocket.NetConn(context.Background(), c, websocket.MessageBinary), http.StatusSwitchingProtocols, ""
}

func TestAnExposedPortIsReachedThroughTheServer(t *testing.T) {
	ts := newTestServer(t, Config{})
	tok := ts.key(t, "acme")
	id, served, idle := ts.portSession(t, tok)

	conn, status, body := ts.dialPort(t, tok, id, served)
	if conn == nil {
		t.Fatalf("raw route on port %d: %d %s", served, status, body)
	}
	const request = "GET /hello.txt HTTP/1.0\r\nHost: sandbox\r\n\r\n"
	if _, err := io.WriteString(conn, request); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(conn)
	conn.Close()
	if err != nil {
		t.Fatalf("read through the relay: %v (so far %q)", err, got)
	}
	if !strings.HasPrefix(string(got), "HTTP/1.0 200") || !strings.HasSuffix(string(got), "\r\n\r\nhello from inside\n") {
		t.Fatalf("GET /hello.txt through the raw route: %q", got)
	}

	// The HTTP route: the path and query arrive as sent, the tenant's
	// key does not.
	base := fmt.Sprintf("/v1/sessions/%s/ports/%d/http", id, served)
	status, data := ts.call(t, tok, "GET", base+"/hello.txt", nil)
	if status != http.StatusOK || string(data) != "hello from inside\n" {
		t.Fatalf("GET %s/hello.txt: %d %q", base, status, data)
	}
	status, data = ts.call(t, tok, "GET", base+"/echo/a%2Fb?x=1", nil)
	if status != http.StatusOK || !strings.HasPrefix(string(data), "path=/echo/a%2Fb?x=1\n") {
		t.Fatalf("GET %s/echo/a%%2Fb?x=1: %d %q", base, status, data)
	}
	if strings.Contains(strings.ToLower(string(data)), "authorization") || strings.Contains(string(data), tok) {
		t.Errorf("the sandbox's server saw the tenant's key:\n%s", data)
	}
	if !strings.Contains(string(data), "Host: 127.0.0.1:"+strconv.Itoa(served)) {
		t.Errorf("the sandbox's server saw another Host:\n%s", data)
	}

	// Refusals, on both routes, with what to do instead.
	hidden := served + 2
	for _, c := range []struct {
		port   any
		status int
		words  []string
	}{
		{idle, http.StatusNotFound, []string{strconv.Itoa(idle)}},
		{hidden, http.StatusBadRequest, []string{"not exposed", fmt.Sprint([]int{served, idle})}},
		{"http", http.StatusBadRequest, []string{"TCP port"}},
		{0, http.StatusBadRequest, []string{"TCP port"}},
	} {
		conn, status, body := ts.dialPort(t, tok, id, c.port)
		if conn != nil {
			conn.Close()
		}
		if status != c.status || !containsAll(body, c.words) {
			t.Errorf("raw route on port %v: %d %s, want %d naming %q", c.port, status, body, c.status, c.words)
		}
		path := fmt.Sprintf("/v1/sessions/%s/ports/%v/http/", id, c.port)
		status, data := ts.call(t, tok, "GET", path, nil)
		if status != c.status || !containsAll(string(data), c.words) {
			t.Errorf("GET %s: %d %s, want %d naming %q", path, status, data, c.status, c.words)
		}
	}
	status, data = ts.call(t, "", "GET", base+"/hello.txt", nil)
	if status != http.StatusUnauthorized {
		t.Errorf("the HTTP route without a key: %d %s", status, data)
	}

	// Every use of a port is in the session's trace, refusals included;
	// the unauthenticated request never reached the session.
	status, data = ts.call(t, tok, "GET", "/v1/traces/"+id, nil)
	if status != http.StatusOK {
		t.Fatalf("GET the trace: %d %s", status, data)
	}
	evs, err := trace.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	var uses []string
	for _, e := range evs {
		if e.Type != trace.ToolCall || !strings.HasPrefix(e.Tool, "port") {
			continue
		}
		use := e.Tool + " " + e.Arguments + ": " + e.Output
		if e.Err != "" {
			use += "error"
		}
		uses = append(uses, use)
	}
	want := []string{
		fmt.Sprintf("port %d: %d bytes in, %d bytes out", served, len(request), len(got)),
		fmt.Sprintf("port_http %d GET /hello.txt: 200 OK", served),
		fmt.Sprintf("port_http %d GET /echo/a%%2Fb: 200 OK", served),
		fmt.Sprintf("port %d: error", idle),
		fmt.Sprintf("port_http %d GET /: error", idle),
		fmt.Sprintf("port %d: error", hidden),
		fmt.Sprintf("port_http %d GET /: error", hidden),
	}
	if strings.Join(uses, "\n") != strings.Join(want, "\n") {
		t.Errorf("the trace's port steps:\n%s\nwant:\n%s", strings.Join(uses, "\n"), strings.Join(want, "\n"))
	}
}

func containsAll(s string, words []string) bool {
	for _, w := range words {
		if !strings.Contains(s, w) {
			return false
		}
	}
	return true
}
