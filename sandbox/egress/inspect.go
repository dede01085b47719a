package egress

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// inspected reports whether the proxy terminates TLS for t.
func (p *Proxy) inspected(t target) bool {
	for _, pat := range p.inspect {
		if pat.admits(t) {
			return true
		}
	}
	return false
}

// serveInspect answers a CONNECT to an inspected host: instead of a
// tunnel, the proxy is the TLS server (with a leaf its session CA signs
// for t's host), reads each request, applies the rules and credentials
// and forwards it over its own TLS connection to the host, verified
// against the host's roots (Config.UpstreamRoots).
func (p *Proxy) serveInspect(w http.ResponseWriter, r *http.Request, t target) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "agentbox egress proxy: connection cannot be hijacked", http.StatusInternalServerError)
		return
	}
	client, brw, err := hj.Hijack()
	if err != nil {
		p.log.Warn("egress: hijack CONNECT", "host", t.String(), "err", err)
		return
	}
	if !p.track(client) {
		_ = client.Close()
		return
	}
	defer p.untrack(client)
	_ = client.SetWriteDeadline(time.Now().Add(p.cfg.DialTimeout))
	if _, err := io.WriteString(client, "HTTP/1.1 200 Connection Established\r\n\r\n"); err != nil {
		return
	}
	_ = client.SetWriteDeadline(time.Time{})

	var raw net.Conn = client
	if n := brw.Reader.Buffered(); n > 0 {
		buffered, _ := brw.Reader.Peek(n)
		raw = &prefixConn{Conn: client, r: io.MultiReader(bytes.NewReader(bytes.Clone(buffered)), client)}
	}
	tc := tls.Server(raw, &tls.Config{
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return p.ca.leaf(t.host) },
		NextProtos:     []string{"h2", "http/1.1"},
		MinVersion:     tls.VersionTLS12,
	})
	ctx, cancel := context.WithTimeout(r.Context(), p.cfg.DialTimeout)
	err = tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		// The usual cause is a client that does not trust the session CA:
		// one that pins the host's certificate or key, or reads its own
		// trust store instead of SSL_CERT_FILE and the system bundle.
		p.record(http.MethodConnect, t.String(), fmt.Sprintf(
			"TLS handshake with the sandbox for inspected host %s failed (%v): the client does not accept the session CA's certificate; a client that pins certificates cannot reach an inspected host, and one with its own trust store must be pointed at SSL_CERT_FILE",
			t.host, err))
		return
	}
	p.serveTLSConn(tc, t)
}

// serveTLSConn serves HTTP/1.1 or HTTP/2 (as negotiated) on an inspected
// connection until it ends.
func (p *Proxy) serveTLSConn(tc *tls.Conn, t target) {
	l := &oneConnListener{c: tc, done: make(chan struct{})}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p.serveInspected(w, r, t)
			if l.hijacked() {
				l.close() // a protocol switch ran to its end in the handler
			}
		}),
		ConnState: func(c net.Conn, s http.ConnState) {
			switch s {
			case http.StateClosed:
				l.close()
			case http.StateHijacked:
				l.setHijacked()
			}
		},
		BaseContext:       func(net.Listener) context.Context { return p.base },
		ReadHeaderTimeout: p.cfg.DialTimeout,
		IdleTimeout:       p.cfg.IdleTimeout,
		MaxHeaderBytes:    p.cfg.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(p.log.Handler(), slog.LevelWarn),
	}
	// A nil TLSConfig lets Serve set up HTTP/2 for a *tls.Conn that
	// negotiated "h2".
	_ = srv.Serve(l)
}

// serveInspected handles one request read from an inspected connection.
func (p *Proxy) serveInspected(w http.ResponseWriter, r *http.Request, t target) {
	// The tunnel was admitted for t: a request naming another authority
	// (domain fronting) is refused, not sent to t under another name.
	if ht, err := parseTarget(r.Host, t.port); err != nil || ht.host != t.host || ht.port != t.port {
		p.refuse(w, r, t.String(), http.StatusForbidden, fmt.Sprintf("Host %q differs from the CONNECT target %s", r.Host, t.String()))
		return
	}
	if status, why := p.checkRequest(r, t); why != "" {
		p.refuse(w, r, t.String(), status, why)
		return
	}
	r = r.WithContext(withTarget(r.Context(), t))
	p.scanBody(r, t)
	p.mitm.ServeHTTP(w, r)
}

// checkRequest applies the request rules and the placeholder check to a
// request (inspected or plain HTTP) for t; it returns the refusal's status
// and reason, or "".
func (p *Proxy) checkRequest(r *http.Request, t target) (int, string) {
	if why := p.misplacedPlaceholder(r, t); why != "" {
		return http.StatusForbidden, why
	}
	if why := p.checkRules(t, r.Method, r.URL.EscapedPath()); why != "" {
		return http.StatusForbidden, why
	}
	return 0, ""
}

// injectCredentials adds the fixed credential headers and the secrets
// that apply to out, a request for t.
func (p *Proxy) injectCredentials(out *http.Request, t target) {
	for _, c := range p.creds {
		if c.pattern.matchesHost(t) && (c.pattern.port == 0 || c.pattern.matchesPort(t)) {
			for name, vs := range c.headers {
				out.Header[name] = append([]string(nil), vs...)
			}
		}
	}
	p.injectSecrets(out, t)
}

// prefixConn is a connection whose first bytes were already read into a
// buffer (a ClientHello sent right behind the CONNECT line).
type prefixConn struct {
	net.Conn
	r io.Reader
}

func (c *prefixConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// oneConnListener hands one connection to http.Server.Serve, then blocks
// Accept until that connection is done, so that Serve returns when the
// connection ends.
type oneConnListener struct {
	c    net.Conn
	mu   sync.Mutex
	sent bool
	hij  bool
	once sync.Once
	done chan struct{}
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	if !l.sent {
		l.sent = true
		l.mu.Unlock()
		return l.c, nil
	}
	l.mu.Unlock()
	<-l.done
	return nil, net.ErrClosed
}

func (l *oneConnListener) close()         { l.once.Do(func() { close(l.done) }) }
func (l *oneConnListener) Close() error   { return nil }
func (l *oneConnListener) Addr() net.Addr { return l.c.LocalAddr() }

func (l *oneConnListener) setHijacked() {
	l.mu.Lock()
	l.hij = true
	l.mu.Unlock()
}

func (l *oneConnListener) hijacked() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.hij
}

// errUpstream strips the URL from a client error: after a placeholder
// swap the URL's query may hold a secret.
func errUpstream(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
