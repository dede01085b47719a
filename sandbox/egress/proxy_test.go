package egress

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/sandbox"
)

func TestConnectToAListedHostCarriesTLSEndToEnd(t *testing.T) {
	ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "hello over tls")
	}))
	defer ts.Close()
	p, addr := startProxy(t, Config{
		Allow: []string{"api.example.test"},
		Dial:  routes{"api.example.test:443": ts.Listener.Addr().String()}.dial,
	})
	tlsCfg := ts.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	tlsCfg.ServerName = "example.com" // the name in httptest's certificate
	c := proxiedClient(t, addr, &http.Transport{TLSClientConfig: tlsCfg})

	resp, err := c.Get("https://api.example.test/")
	if err != nil {
		t.Fatalf("GET through the tunnel: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(body) != "hello over tls" {
		t.Errorf("got %s %q", resp.Status, body)
	}
	if d := p.Denials(); len(d) != 0 {
		t.Errorf("unexpected denials %v", d)
	}
}

func TestPlainHTTPIsForwardedWithInjectedCredentials(t *testing.T) {
	type seen struct{ auth, proxyAuth, host, xff, custom string }
	got := make(chan seen, 1)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- seen{r.Header.Get("Authorization"), r.Header.Get("Proxy-Authorization"), r.Host, r.Header.Get("X-Forwarded-For"), r.Header.Get("X-Custom")}
		// A server that reflects the credential must not leak it back.
		w.Header().Set("X-Echo-Auth", r.Header.Get("Authorization"))
		w.Header().Set("X-Fine", "kept")
		fmt.Fprintf(w, "path=%s", r.URL.Path)
	}))
	defer ts.Close()
	_, addr := startProxy(t, Config{
		Allow:       []string{"api.example.test"},
		Credentials: map[string]map[string]string{"api.example.test": {"Authorization": "Bearer s3cret"}},
		Dial:        routes{"api.example.test:80": ts.Listener.Addr().String()}.dial,
	})
	c := proxiedClient(t, addr, nil)
	req, _ := http.NewRequest("GET", "http://api.example.test/v1/models", nil)
	req.Header.Set("Authorization", "Bearer forged-by-sandbox")
	req.Header.Set("Proxy-Authorization", "Basic c2FuZGJveA==")
	req.Header.Set("X-Custom", "passes")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	s := <-got

	if s.auth != "Bearer s3cret" {
		t.Errorf("upstream Authorization = %q, want the injected credential", s.auth)
	}
	if s.proxyAuth != "" {
		t.Errorf("Proxy-Authorization reached upstream: %q", s.proxyAuth)
	}
	if s.host != "api.example.test" {
		t.Errorf("upstream Host = %q, want api.example.test", s.host)
	}
	if s.xff != "" {
		t.Errorf("X-Forwarded-For added: %q", s.xff)
	}
	if s.custom != "passes" {
		t.Errorf("end-to-end header lost: %q", s.custom)
	}
	if string(body) != "path=/v1/models" {
		t.Errorf("body %q", body)
	}
	for name, vs := range resp.Header {
		if strings.Contains(strings.Join(vs, " "), "s3cret") {
			t.Errorf("response header %s carries the secret back", name)
		}
	}
	if resp.Header.Get("X-Fine") != "kept" {
		t.Errorf("an innocent response header was dropped")
	}
}

func TestTheSandboxCannotChooseTheUpstreamHostHeader(t *testing.T) {
	hosts := make(chan string, 1)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hosts <- r.Host }))
	defer ts.Close()
	_, addr := startProxy(t, Config{
		Allow: []string{"api.example.test"},
		Dial:  routes{"api.example.test:80": ts.Listener.Addr().String()}.dial,
	})
	code, _ := rawRequest(t, addr, "GET http://api.example.test/ HTTP/1.1\r\nHost: unlisted.example\r\n\r\n")
	if code != 200 {
		t.Fatalf("status %d", code)
	}
	if h := <-hosts; h != "api.example.test" {
		t.Errorf("upstream saw Host %q, want the URL's host", h)
	}
}

func TestRefusals(t *testing.T) {
	echo, accepts := echoServer(t)
	p, addr := startProxy(t, Config{
		Allow: []string{"api.example.test", "*.example.test", "alt.example.org:8443"},
		Dial: routes{
			"api.example.test:443":  echo,
			"a.example.test:443":    echo,
			"alt.example.org:8443":  echo,
			"evil.example:443":      echo,
			"example.test.evil:443": echo,
			"api.example.test:8443": echo,
			"10.0.0.1:443":          echo,
		}.dial,
	})
	tests := []struct {
		name   string
		raw    string
		status int
		body   string // part of the refusal body
		denial []string
	}{
		{"CONNECT to an unlisted host is refused", "CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n",
			403, "host evil.example is not in the allow-list", []string{"CONNECT", `"evil.example:443"`, "not in the allow-list"}},
		{"plain HTTP to an unlisted host is refused", "GET http://evil.example/ HTTP/1.1\r\nHost: evil.example\r\n\r\n",
			403, "host evil.example is not in the allow-list", []string{"GET", `"evil.example:80"`}},
		{"a suffix attack on a wildcard is refused", "CONNECT example.test.evil:443 HTTP/1.1\r\nHost: x\r\n\r\n",
			403, "host example.test.evil is not in the allow-list", []string{"example.test.evil"}},
		{"an unlisted port of a listed host is refused", "CONNECT api.example.test:8443 HTTP/1.1\r\nHost: x\r\n\r\n",
			403, "port 8443 of api.example.test is not in the allow-list", []string{"port 8443"}},
		{"443 of a host listed with another port is refused", "CONNECT alt.example.org:443 HTTP/1.1\r\nHost: x\r\n\r\n",
			403, "port 443 of alt.example.org", []string{"alt.example.org"}},
		{"an unlisted IP literal is refused", "CONNECT 10.0.0.1:443 HTTP/1.1\r\nHost: x\r\n\r\n",
			403, "host 10.0.0.1 is not in the allow-list", []string{"10.0.0.1"}},
		{"CONNECT without a port is refused as malformed", "CONNECT api.example.test HTTP/1.1\r\nHost: x\r\n\r\n",
			400, "has no port", []string{"bad CONNECT target"}},
		{"CONNECT to a malformed name is refused", "CONNECT exa_mple.test:443 HTTP/1.1\r\nHost: x\r\n\r\n",
			400, "not a host name", nil},
		{"an origin-form request is not a proxy request", "GET / HTTP/1.1\r\nHost: api.example.test\r\n\r\n",
			400, "not a proxy request", nil},
		{"an https:// absolute URI must use CONNECT", "GET https://api.example.test/ HTTP/1.1\r\nHost: api.example.test\r\n\r\n",
			400, "use CONNECT", nil},
		{"an ftp:// URI is refused", "GET ftp://api.example.test/ HTTP/1.1\r\nHost: api.example.test\r\n\r\n",
			400, "only http://", nil},
		{"an oversized header is refused", "GET http://api.example.test/ HTTP/1.1\r\nHost: api.example.test\r\nX-Big: " + strings.Repeat("a", 80<<10) + "\r\n\r\n",
			431, "", nil},
		{"garbage is refused", "\x16\x03\x01 not http at all\r\n\r\n", 400, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := accepts()
			code, body := rawRequest(t, addr, tt.raw)
			if code != tt.status {
				t.Errorf("status %d, want %d (body %q)", code, tt.status, body)
			}
			if !strings.Contains(body, tt.body) {
				t.Errorf("body %q does not contain %q", body, tt.body)
			}
			if tt.denial != nil && !containsDenial(p.Denials(), tt.denial...) {
				t.Errorf("no denial with %q in %q", tt.denial, p.Denials())
			}
			if accepts() != before {
				t.Errorf("a refused request still reached the upstream")
			}
		})
	}
}

func TestListedTargetsAreTunnelled(t *testing.T) {
	echo, _ := echoServer(t)
	_, addr := startProxy(t, Config{
		Allow: []string{"*.example.test", "alt.example.org:8443"},
		Dial:  routes{"a.example.test:443": echo, "b.a.example.test:80": echo, "alt.example.org:8443": echo}.dial,
	})
	for _, target := range []string{"a.example.test:443", "b.a.example.test:80", "alt.example.org:8443", "A.Example.Test.:443"} {
		t.Run(target+" is tunnelled", func(t *testing.T) {
			c, br := connect(t, addr, target)
			fmt.Fprint(c, "ping\n")
			line, err := br.ReadString('\n')
			if err != nil || line != "ping\n" {
				t.Errorf("echo through tunnel = %q, %v", line, err)
			}
		})
	}
}

func TestANameResolvingToLoopbackIsRefused(t *testing.T) {
	echo, accepts := echoServer(t)
	_, port, _ := net.SplitHostPort(echo)
	// No Dial hook: the proxy resolves names itself. localhost resolves to
	// 127.0.0.1 (and ::1), which must not be reachable through a name.
	p, addr := startProxy(t, Config{Allow: []string{"localhost:" + port}})
	code, body := rawRequest(t, addr, "CONNECT localhost:"+port+" HTTP/1.1\r\nHost: x\r\n\r\n")
	if code != 403 || !strings.Contains(body, "non-public") {
		t.Errorf("status %d body %q, want 403 naming non-public addresses", code, body)
	}
	code, _ = rawRequest(t, addr, "GET http://localhost:"+port+"/ HTTP/1.1\r\nHost: localhost\r\n\r\n")
	if code != 403 {
		t.Errorf("plain HTTP: status %d, want 403", code)
	}
	if accepts() != 0 {
		t.Errorf("the loopback listener was reached")
	}
	if !containsDenial(p.Denials(), "localhost", "non-public") {
		t.Errorf("denials %q lack the loopback refusal", p.Denials())
	}
}

func TestAnExplicitlyListedLoopbackLiteralIsReachable(t *testing.T) {
	echo, accepts := echoServer(t)
	_, addr := startProxy(t, Config{Allow: []string{echo}})
	c, br := connect(t, addr, echo)
	fmt.Fprint(c, "hi\n")
	if line, err := br.ReadString('\n'); err != nil || line != "hi\n" {
		t.Errorf("echo = %q, %v", line, err)
	}
	if accepts() != 1 {
		t.Errorf("accepts = %d, want 1", accepts())
	}
}

func TestUpstreamFailureIsABadGatewayNotADenial(t *testing.T) {
	p, addr := startProxy(t, Config{
		Allow: []string{"down.example.test"},
		Dial:  routes{}.dial, // no route: the dial fails
	})
	code, _ := rawRequest(t, addr, "CONNECT down.example.test:443 HTTP/1.1\r\nHost: x\r\n\r\n")
	if code != http.StatusBadGateway {
		t.Errorf("status %d, want 502", code)
	}
	code, _ = rawRequest(t, addr, "GET http://down.example.test/ HTTP/1.1\r\nHost: down.example.test\r\n\r\n")
	if code != http.StatusBadGateway {
		t.Errorf("plain HTTP status %d, want 502", code)
	}
	if d := p.Denials(); len(d) != 0 {
		t.Errorf("upstream failures recorded as denials: %q", d)
	}
}

func TestNewRejectsBadConfigs(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  Config
	}{
		{"an empty allow-list is rejected", Config{}},
		{"a malformed entry is rejected", Config{Allow: []string{"bad host"}}},
		{"credentials for an unlisted host are rejected", Config{Allow: []string{"a.example.test"}, Credentials: map[string]map[string]string{"b.example.test": {"Authorization": "x"}}}},
		{"a header with a newline is rejected", Config{Allow: []string{"a.example.test"}, Credentials: map[string]map[string]string{"a.example.test": {"Authorization": "x\r\nEvil: 1"}}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.cfg); !errors.Is(err, sandbox.ErrInvalid) {
				t.Errorf("New = %v, want ErrInvalid", err)
			}
		})
	}
}

func TestCredentialsMayNameAHostAWildcardAdmits(t *testing.T) {
	if _, err := New(Config{Allow: []string{"*.example.test"}, Credentials: map[string]map[string]string{"api.example.test": {"X-Key": "k"}}}); err != nil {
		t.Errorf("New: %v", err)
	}
}

func TestCloseEndsOpenTunnels(t *testing.T) {
	echo, _ := echoServer(t)
	p, addr := startProxy(t, Config{Allow: []string{"a.example.test"}, Dial: routes{"a.example.test:443": echo}.dial})
	c, br := connect(t, addr, "a.example.test:443")
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, err := br.ReadByte(); err == nil || errors.Is(err, errTimeout(err)) {
		t.Errorf("tunnel still open after Close: %v", err)
	}
}

// errTimeout returns err when it is a timeout, so the assertion above
// fails on "still open" rather than on a closed connection.
func errTimeout(err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return err
	}
	return errors.New("not a timeout")
}

func TestIdleTunnelsAreClosed(t *testing.T) {
	echo, _ := echoServer(t)
	_, addr := startProxy(t, Config{
		Allow:       []string{"a.example.test"},
		IdleTimeout: 150 * time.Millisecond,
		Dial:        routes{"a.example.test:443": echo}.dial,
	})
	c, br := connect(t, addr, "a.example.test:443")
	// Traffic keeps it open past one idle period...
	for range 3 {
		time.Sleep(80 * time.Millisecond)
		fmt.Fprint(c, "x\n")
		if _, err := br.ReadString('\n'); err != nil {
			t.Fatalf("active tunnel closed: %v", err)
		}
	}
	// ...silence closes it.
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	start := time.Now()
	if _, err := br.ReadByte(); err == nil || errTimeout(err) == err {
		t.Fatalf("idle tunnel not closed: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("closed after %v", d)
	}
}

func TestConnectionsBeyondTheLimitWait(t *testing.T) {
	echo, _ := echoServer(t)
	_, addr := startProxy(t, Config{Allow: []string{"a.example.test"}, MaxConns: 1, Dial: routes{"a.example.test:443": echo}.dial})
	first, _ := connect(t, addr, "a.example.test:443")

	second, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	fmt.Fprint(second, "CONNECT a.example.test:443 HTTP/1.1\r\nHost: x\r\n\r\n")
	_ = second.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	buf := make([]byte, 1)
	if _, err := second.Read(buf); err == nil {
		t.Fatalf("second connection served while the first holds the only slot")
	}
	first.Close()
	_ = second.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := second.Read(buf); err != nil {
		t.Errorf("second connection not served after the first closed: %v", err)
	}
}

func TestConcurrentRequests(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, r.URL.Path) }))
	defer ts.Close()
	echo, _ := echoServer(t)
	p, addr := startProxy(t, Config{
		Allow: []string{"api.example.test"},
		Dial:  routes{"api.example.test:80": ts.Listener.Addr().String(), "api.example.test:443": echo}.dial,
	})
	c := proxiedClient(t, addr, &http.Transport{TLSClientConfig: &tls.Config{}})
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch i % 3 {
			case 0:
				resp, err := c.Get(fmt.Sprintf("http://api.example.test/%d", i))
				if err != nil {
					t.Errorf("GET: %v", err)
					return
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if string(body) != fmt.Sprintf("/%d", i) {
					t.Errorf("body %q", body)
				}
			case 1:
				resp, err := c.Get("http://unlisted.example.test/")
				if err != nil {
					t.Errorf("GET unlisted: %v", err)
					return
				}
				resp.Body.Close()
				if resp.StatusCode != 403 {
					t.Errorf("unlisted status %d", resp.StatusCode)
				}
			case 2:
				conn, br := connect(t, addr, "api.example.test:443")
				fmt.Fprintf(conn, "%d\n", i)
				if line, _ := br.ReadString('\n'); line != fmt.Sprintf("%d\n", i) {
					t.Errorf("echo %q", line)
				}
			}
		}()
	}
	wg.Wait()
	if n := len(p.Denials()); n != 5 {
		t.Errorf("denials = %d, want 5", n)
	}
}

func TestBytesSentRightAfterConnectAreNotLost(t *testing.T) {
	echo, _ := echoServer(t)
	_, addr := startProxy(t, Config{Allow: []string{"a.example.test"}, Dial: routes{"a.example.test:443": echo}.dial})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// One write: the request and the first tunnel bytes arrive together
	// and land in the proxy's read buffer.
	fmt.Fprint(c, "CONNECT a.example.test:443 HTTP/1.1\r\nHost: x\r\n\r\neager\n")
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(io.LimitReader(c, int64(len("HTTP/1.1 200 Connection Established\r\n\r\neager\n"))))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(string(got), "\r\n\r\neager\n") {
		t.Errorf("got %q, want the eager bytes echoed after the 200", got)
	}
}
