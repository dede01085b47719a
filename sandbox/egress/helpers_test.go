package egress

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

func mustAddr(t *testing.T, s string) netip.Addr {
	t.Helper()
	a, err := netip.ParseAddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// routes is a test Dial hook: it maps requested "host:port" names to the
// loopback test servers that play them, and fails for anything else.
type routes map[string]string

func (r routes) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	real, ok := r[addr]
	if !ok {
		return nil, fmt.Errorf("test dialer: no route to %s", addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, real)
}

// startProxy serves a Proxy on a loopback port and closes it at cleanup,
// checking that Serve then returns nil.
func startProxy(t *testing.T, cfg Config) (*Proxy, string) {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- p.Serve(l) }()
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("Serve returned %v after Close, want nil", err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("Serve did not return after Close")
		}
	})
	return p, l.Addr().String()
}

// proxiedClient is an HTTP client that uses the proxy for every request.
func proxiedClient(t *testing.T, proxyAddr string, tr *http.Transport) *http.Client {
	t.Helper()
	if tr == nil {
		tr = &http.Transport{}
	}
	u, _ := url.Parse("http://" + proxyAddr)
	tr.Proxy = http.ProxyURL(u)
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// rawRequest writes raw bytes to the proxy and returns the response's
// status code and body.
func rawRequest(t *testing.T, proxyAddr, raw string) (int, string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", proxyAddr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("read response to %q: %v", raw, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// connect opens a CONNECT tunnel through the proxy and returns the
// connection after a 200, or fails the test with the refusal.
func connect(t *testing.T, proxyAddr, target string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.DialTimeout("tcp", proxyAddr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		c.Close()
		t.Fatalf("CONNECT %s: %v", target, err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		c.Close()
		t.Fatalf("CONNECT %s: %s %s", target, resp.Status, body)
	}
	_ = c.SetReadDeadline(time.Time{})
	t.Cleanup(func() { c.Close() })
	return c, br
}

// echoServer accepts TCP connections and echoes them, counting accepts.
func echoServer(t *testing.T) (addr string, accepts func() int) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	n := 0
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			n++
			mu.Unlock()
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	t.Cleanup(func() { l.Close() })
	return l.Addr().String(), func() int { mu.Lock(); defer mu.Unlock(); return n }
}

func containsDenial(denials []Denial, parts ...string) bool {
	for _, d := range denials {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(d.String(), p)
		}
		if ok {
			return true
		}
	}
	return false
}
