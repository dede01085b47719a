package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/trace"
)

// A session's exposed ports (Spec.Ports) are reached through the server
// with the tenant's key, never by a listener of their own: the raw route
// carries one TCP connection as WebSocket binary messages, the http route
// proxies HTTP requests (WebSocket upgrades included) to the port. Either
// reaches 127.0.0.1:port inside the sandbox and nothing else (see
// sandbox.DialPort).

// Each use of a port is a step of the session's trace, as a command is:
// a raw connection (tool "port", with the bytes each way and how long it
// lasted) and each proxied HTTP request (tool "port_http", with the
// method, path and status), refused ones with their error. An auditor
// reading a trace sees every way in, not only the commands.

// portRelayLimit is the largest binary message a port relay reads; a
// client writes at most 32 KiB a message (io.Copy's buffer), with room.
const portRelayLimit = 1 << 20

// port parses the request's {port} path value.
func port(r *http.Request) (int, error) {
	p, err := strconv.Atoi(r.PathValue("port"))
	if err != nil || p < 1 || p > 65535 {
		return 0, sandbox.Errorf(sandbox.ErrInvalid, "port %q: a TCP port is 1 to 65535", r.PathValue("port"))
	}
	return p, nil
}

// handlePort connects to an exposed port, then upgrades to a WebSocket
// and relays bytes both ways until either side closes. The connection is
// made before the upgrade, so a port not exposed (400), nothing listening
// (404) or a backend that cannot (501) answers as any request does.
func (s *Server) handlePort(w http.ResponseWriter, r *http.Request, t *tenant) error {
	l, sess, err := s.use(t, r.PathValue("id"))
	if err != nil {
		return err
	}
	p, err := port(r)
	if err != nil {
		return err
	}
	ev := trace.Event{Type: trace.ToolCall, Tool: "port", Arguments: strconv.Itoa(p)}
	conn, err := sandbox.DialPort(r.Context(), sess, p)
	if err != nil {
		ev.Err = err.Error()
		l.emit(ev)
		return s.checked(l, err)
	}
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		conn.Close()
		ev.Err = "the WebSocket upgrade failed: " + err.Error()
		l.emit(ev)
		return nil // Accept answered the client
	}
	c.SetReadLimit(portRelayLimit)
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	start := time.Now()
	in, out := relay(c, websocket.NetConn(ctx, c, websocket.MessageBinary), conn)
	ev.Output = fmt.Sprintf("%d bytes in, %d bytes out", in, out)
	ev.DurationMS = time.Since(start).Milliseconds()
	l.emit(ev)
	return nil
}

// relay copies a (the WebSocket ws as a net.Conn) to b and b to a until
// one side ends, then closes both: a WebSocket has no half-close, so the
// first end is the end. It returns the bytes copied from a to b and from
// b to a. The WebSocket is closed with its close handshake, which its
// reader takes part in; a's own Close would first cancel that reader,
// and the connection could then drop without the close frame, which the
// client reads as an error after the last byte.
func relay(ws *websocket.Conn, a, b net.Conn) (ab, ba int64) {
	var once sync.Once
	closeBoth := func() {
		once.Do(func() {
			_ = ws.Close(websocket.StatusNormalClosure, "")
			b.Close()
		})
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		ba, _ = io.Copy(a, b)
		closeBoth()
	}()
	ab, _ = io.Copy(b, a)
	closeBoth()
	<-done
	return ab, ba
}

// handlePortHTTP proxies a request to an HTTP server on an exposed port:
// /v1/sessions/ID/ports/PORT/http/PATH reaches http://127.0.0.1:PORT/PATH
// inside the sandbox. The tenant's key is taken off the request; the
// sandbox never sees it.
func (s *Server) handlePortHTTP(w http.ResponseWriter, r *http.Request, t *tenant) error {
	l, sess, err := s.use(t, r.PathValue("id"))
	if err != nil {
		return err
	}
	p, err := port(r)
	if err != nil {
		return err
	}
	ev := trace.Event{Type: trace.ToolCall, Tool: "port_http", Arguments: fmt.Sprintf("%d %s %s", p, r.Method, rawPath(r))}
	start := time.Now()
	defer func() {
		ev.DurationMS = time.Since(start).Milliseconds()
		l.emit(ev)
	}()
	if err := sandbox.CheckExposed(sess.State().Spec, p); err != nil {
		ev.Err = err.Error()
		return err
	}
	// The transport's error is wrapped by net/http; the dial's own error
	// keeps its kind (404 nothing listening, 501 unsupported).
	var mu sync.Mutex
	var dialErr error
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			conn, err := sandbox.DialPort(ctx, sess, p)
			if err != nil {
				mu.Lock()
				dialErr = err
				mu.Unlock()
			}
			return conn, err
		},
		// One request, one connection: nothing idles after the answer.
		DisableKeepAlives: true,
	}
	defer tr.CloseIdleConnections()
	host := net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	var proxyErr error
	rp := &httputil.ReverseProxy{
		Transport: tr,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = host
			pr.Out.URL.Path = "/" + r.PathValue("path")
			pr.Out.URL.RawPath = rawPath(r)
			pr.Out.Host = host
			pr.Out.Header.Del("Authorization")
		},
		ModifyResponse: func(resp *http.Response) error {
			ev.Output = resp.Status
			return nil
		},
		ErrorHandler: func(_ http.ResponseWriter, _ *http.Request, err error) {
			mu.Lock()
			if dialErr != nil {
				err = dialErr
			}
			mu.Unlock()
			if !errors.Is(err, sandbox.ErrNotFound) && !errors.Is(err, sandbox.ErrUnsupported) && !errors.Is(err, sandbox.ErrInvalid) {
				err = sandbox.Wrap("proxy to port "+strconv.Itoa(p), sandbox.ErrUnavailable, err)
			}
			proxyErr = s.checked(l, err)
			ev.Err = err.Error()
		},
	}
	rp.ServeHTTP(w, r)
	return proxyErr
}

// rawPath is the escaped path after .../http of a proxied request, so an
// escaped slash or space reaches the server in the sandbox as sent.
func rawPath(r *http.Request) string {
	esc := r.URL.EscapedPath()
	// The session id is one segment: a literal "/ports/" is this one.
	mark := "/ports/" + r.PathValue("port") + "/http"
	if i := strings.Index(esc, mark); i >= 0 {
		return esc[i+len(mark):]
	}
	return ""
}
