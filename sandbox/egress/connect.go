package egress

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// serveConnect opens a tunnel to an allowed host:port.
func (p *Proxy) serveConnect(w http.ResponseWriter, r *http.Request) {
	t, err := parseTarget(r.URL.Host, 0)
	if err != nil {
		p.refuse(w, r, r.URL.Host, http.StatusBadRequest, "bad CONNECT target: "+err.Error())
		return
	}
	if status, err := p.admit(t); err != nil {
		p.refuse(w, r, t.String(), status, err.Error())
		return
	}
	if p.inspected(t) {
		p.serveInspect(w, r, t)
		return
	}
	up, err := p.dial(r.Context(), t)
	if err != nil {
		p.upstreamFailed(w, r, t.String(), err)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		_ = up.Close()
		http.Error(w, "agentbox egress proxy: connection cannot be hijacked", http.StatusInternalServerError)
		return
	}
	client, brw, err := hj.Hijack()
	if err != nil {
		_ = up.Close()
		p.log.Warn("egress: hijack CONNECT", "host", t.String(), "err", err)
		return
	}
	if !p.track(client, up) {
		_ = client.Close()
		_ = up.Close()
		return
	}
	defer p.untrack(client, up)

	_ = client.SetWriteDeadline(time.Now().Add(p.cfg.DialTimeout))
	if _, err := io.WriteString(client, "HTTP/1.1 200 Connection Established\r\n\r\n"); err != nil {
		return
	}
	_ = client.SetWriteDeadline(time.Time{})
	p.log.Debug("egress tunnel", "host", t.String())

	// Bytes the client sent after the CONNECT line (an eager TLS
	// ClientHello) sit in the server's buffer: send them first.
	var fromClient io.Reader = client
	if n := brw.Reader.Buffered(); n > 0 {
		buffered, _ := brw.Reader.Peek(n)
		fromClient = io.MultiReader(bytes.NewReader(bytes.Clone(buffered)), client)
	}
	p.pipe(client, fromClient, up)
}

// pipe copies both ways until either side ends or stays idle for
// IdleTimeout, then closes both.
func (p *Proxy) pipe(client net.Conn, fromClient io.Reader, up net.Conn) {
	var wg sync.WaitGroup
	wg.Add(2)
	idle := p.cfg.IdleTimeout
	go func() {
		defer wg.Done()
		copyIdle(up, fromClient, client, up, idle)
		closeWrite(up)
	}()
	go func() {
		defer wg.Done()
		copyIdle(client, up, up, client, idle)
		closeWrite(client)
	}()
	wg.Wait()
}

// copyIdle copies src to dst, extending both connections' deadlines on
// each chunk so that only a tunnel idle in both directions times out.
// (Refreshing both avoids cutting a long download whose other direction is
// quiet.)
func copyIdle(dst io.Writer, src io.Reader, srcConn, dstConn net.Conn, idle time.Duration) {
	buf := make([]byte, 32<<10)
	for {
		_ = srcConn.SetReadDeadline(time.Now().Add(idle))
		n, err := src.Read(buf)
		if n > 0 {
			deadline := time.Now().Add(idle)
			_ = dstConn.SetReadDeadline(deadline)
			_ = dstConn.SetWriteDeadline(deadline)
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// closeWrite half-closes a TCP connection so the peer sees EOF, or closes
// it outright when it cannot be half-closed.
func closeWrite(c net.Conn) {
	type closeWriter interface{ CloseWrite() error }
	if cw, ok := unwrapConn(c).(closeWriter); ok {
		if err := cw.CloseWrite(); err == nil || errors.Is(err, net.ErrClosed) {
			return
		}
	}
	_ = c.Close()
}

// unwrapConn sees through the connection-limit wrapper.
func unwrapConn(c net.Conn) net.Conn {
	if lc, ok := c.(*limitConn); ok {
		return lc.Conn
	}
	return c
}

// track registers an open tunnel so Close can end it; false after Close.
func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	for _, c := range cs {
		p.tunnels[c] = struct{}{}
	}
	return true
}

func (p *Proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	for _, c := range cs {
		delete(p.tunnels, c)
	}
	p.mu.Unlock()
	for _, c := range cs {
		_ = c.Close()
	}
}
