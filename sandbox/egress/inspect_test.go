package egress

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/sandbox"
)

const testSecret = "sk-live-0123456789abcdef"

// upstreamLog is what an HTTPS test upstream saw.
type upstreamLog struct {
	mu   sync.Mutex
	reqs []seen
}

type seen struct {
	method, host, path, query, auth, apiKey, body string
	proto                                         int
}

func (u *upstreamLog) all() []seen {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]seen(nil), u.reqs...)
}

func (u *upstreamLog) text() string { return fmt.Sprint(u.all()) }

// httpsUpstream is a loopback HTTPS server (HTTP/1.1 and HTTP/2) that
// records each request; extra handles paths under /x/.
func httpsUpstream(t *testing.T, extra http.HandlerFunc) (*httptest.Server, *upstreamLog) {
	t.Helper()
	log := &upstreamLog{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		log.mu.Lock()
		log.reqs = append(log.reqs, seen{r.Method, r.Host, r.URL.Path, r.URL.RawQuery, r.Header.Get("Authorization"), r.Header.Get("X-Api-Key"), string(body), r.ProtoMajor})
		log.mu.Unlock()
		if extra != nil && strings.HasPrefix(r.URL.Path, "/x/") {
			extra(w, r)
			return
		}
		fmt.Fprintf(w, "hello over HTTP/%d", r.ProtoMajor)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, log
}

// inspectingProxy serves a proxy that reaches the upstream as host:443
// through a test route and trusts the upstream's certificate.
func inspectingProxy(t *testing.T, srv *httptest.Server, logTo io.Writer, cfg Config) (*Proxy, string) {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	addr := srv.Listener.Addr().String()
	cfg.Dial = routes{"api.example.com:443": addr, "other.example.com:443": addr, "plain.example.com:80": addr}.dial
	cfg.UpstreamRoots = roots
	if logTo != nil {
		cfg.Logger = slog.New(slog.NewTextHandler(logTo, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return startProxy(t, cfg)
}

// sandboxClient is what a client in the sandbox is: it uses the proxy and
// trusts the session CA only.
func sandboxClient(t *testing.T, p *Proxy, proxyAddr string, h2 bool) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(p.CACert()) {
		t.Fatalf("CACert %q is not a PEM certificate", p.CACert())
	}
	return proxiedClient(t, proxyAddr, &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: h2})
}

func get(t *testing.T, c *http.Client, method, url string, hdr map[string]string, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestInspectedHTTPSCarriesTheInjectedCredentialOverHTTP1And2(t *testing.T) {
	t.Setenv("AGENTBOX_TEST_TOKEN", testSecret)
	srv, up := httpsUpstream(t, nil)
	var logs bytes.Buffer
	p, addr := inspectingProxy(t, srv, &logs, Config{
		Allow:   []string{"api.example.com"},
		Secrets: []sandbox.Credential{{Host: "api.example.com", Kind: sandbox.CredBearer, Source: "env:AGENTBOX_TEST_TOKEN"}},
	})
	for _, h2 := range []bool{false, true} {
		resp, body := get(t, sandboxClient(t, p, addr, h2), "GET", "https://api.example.com/v1/models", nil, "")
		if resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, body)
		}
		want := 1
		if h2 {
			want = 2
		}
		if resp.ProtoMajor != want {
			t.Errorf("h2=%v: the sandbox spoke HTTP/%d to the proxy, want %d", h2, resp.ProtoMajor, want)
		}
		if got := resp.TLS.PeerCertificates[0].Issuer.CommonName; !strings.HasPrefix(got, "agentbox session CA") {
			t.Errorf("the sandbox saw a certificate issued by %q, want the session CA", got)
		}
		if strings.Contains(body, testSecret) || strings.Contains(fmt.Sprint(resp.Header), testSecret) {
			t.Errorf("the secret came back to the sandbox: %q %v", body, resp.Header)
		}
	}
	reqs := up.all()
	if len(reqs) != 2 {
		t.Fatalf("upstream saw %d requests, want 2: %v", len(reqs), reqs)
	}
	for _, r := range reqs {
		if r.auth != "Bearer "+testSecret || r.host != "api.example.com" || r.proto != 2 {
			t.Errorf("upstream saw %+v, want the bearer secret, Host api.example.com, over HTTP/2 (the proxy's own TLS)", r)
		}
	}
	if strings.Contains(logs.String(), testSecret) {
		t.Errorf("the proxy's log holds the secret:\n%s", logs.String())
	}
}

func TestTheUpstreamIsVerifiedAgainstTheHostsRoots(t *testing.T) {
	srv, up := httpsUpstream(t, nil)
	p, addr := inspectingProxy(t, srv, nil, Config{Allow: []string{"api.example.com"}, Inspect: []string{"api.example.com"}})
	p.upTr.TLSClientConfig.RootCAs = x509.NewCertPool() // a root that did not sign the upstream
	resp, body := get(t, sandboxClient(t, p, addr, false), "GET", "https://api.example.com/", nil, "")
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "certificate") {
		t.Errorf("an upstream with an untrusted certificate gave %d %q, want 502 naming the certificate", resp.StatusCode, body)
	}
	if n := len(up.all()); n != 0 {
		t.Errorf("the upstream saw %d requests over an unverified connection", n)
	}
}

func TestAPinningClientFailsWithAClearDenial(t *testing.T) {
	srv, _ := httpsUpstream(t, nil)
	p, addr := inspectingProxy(t, srv, nil, Config{Allow: []string{"api.example.com"}, Inspect: []string{"api.example.com"}})
	// The client trusts only the upstream's own certificate, as one that
	// pins it would.
	pinned := x509.NewCertPool()
	pinned.AddCert(srv.Certificate())
	c := proxiedClient(t, addr, &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pinned}})
	_, err := c.Get("https://api.example.com/")
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a pinning client got err %v, want a certificate error", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !containsDenial(p.Denials(), "api.example.com", "does not accept the session CA", "pins certificates") {
		if time.Now().After(deadline) {
			t.Fatalf("denials %q do not explain the pinning failure", p.Denials())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestPlaceholdersAreSwappedOnlyTowardTheirHost(t *testing.T) {
	t.Setenv("AGENTBOX_TEST_TOKEN", testSecret)
	srv, up := httpsUpstream(t, nil)
	p, addr := inspectingProxy(t, srv, nil, Config{
		Allow:   []string{"api.example.com", "other.example.com", "plain.example.com"},
		Inspect: []string{"other.example.com"},
		Secrets: []sandbox.Credential{{Host: "api.example.com", PathPrefix: "/v1", Kind: sandbox.CredPlaceholder, Name: "API_KEY", Source: "env:AGENTBOX_TEST_TOKEN"}},
	})
	ph := p.Placeholders()["API_KEY"]
	if !strings.HasPrefix(ph, PlaceholderPrefix) || strings.Contains(ph, testSecret) {
		t.Fatalf("placeholder %q", ph)
	}
	c := sandboxClient(t, p, addr, false)
	resp, body := get(t, c, "GET", "https://api.example.com/v1/chat?key="+ph, map[string]string{"X-Api-Key": ph}, "")
	if resp.StatusCode != 200 {
		t.Fatalf("to its own host: %d %s", resp.StatusCode, body)
	}
	r := up.all()[0]
	if r.apiKey != testSecret || r.query != "key="+testSecret {
		t.Errorf("upstream saw X-Api-Key %q and query %q, want the secret in both", r.apiKey, r.query)
	}

	for _, tc := range []struct {
		name, method, url string
		hdr               map[string]string
		body              string
	}{
		{"in a header to another inspected host", "GET", "https://other.example.com/", map[string]string{"Authorization": "Bearer " + ph}, ""},
		{"in the query to another host", "GET", "https://other.example.com/?q=" + ph, nil, ""},
		{"in a body to another host", "POST", "https://other.example.com/upload", nil, strings.Repeat("x", 100<<10) + ph + "tail"},
		{"over plain HTTP", "GET", "http://plain.example.com/", map[string]string{"Cookie": "k=" + ph}, ""},
		{"to its host outside the path prefix", "GET", "https://api.example.com/v2/", map[string]string{"X-Api-Key": ph}, ""},
		{"in a host name", "GET", "http://" + ph + ".example.com/", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := p.Refused()
			resp, body := get(t, c, tc.method, tc.url, tc.hdr, tc.body)
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(resp.Header.Get(ReasonHeader), "exfiltration") {
				t.Errorf("status %d reason %q body %q, want 403 naming exfiltration", resp.StatusCode, resp.Header.Get(ReasonHeader), body)
			}
			if d := p.DenialsSince(before); len(d) != 1 || !strings.Contains(d[0].String(), "$API_KEY") {
				t.Errorf("denials %q: no violation recorded", d)
			}
		})
	}
	if text := up.text(); strings.Contains(text, ph) && strings.Count(text, ph) > 0 {
		t.Errorf("the placeholder reached an upstream it is not for: %s", text)
	}
}

func TestRequestRulesAdmitByMethodAndPath(t *testing.T) {
	srv, up := httpsUpstream(t, nil)
	p, addr := inspectingProxy(t, srv, nil, Config{
		Allow: []string{"api.example.com"},
		Rules: []sandbox.RequestRule{
			{Host: "api.example.com", Methods: []string{"GET", "HEAD"}, Paths: []string{"/repos/acme/**"}},
			{Host: "api.example.com", Methods: []string{"POST"}, Paths: []string{"/repos/acme/*/issues"}},
		},
	})
	c := sandboxClient(t, p, addr, true)
	for _, tc := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/repos/acme/widget/pulls", 200},
		{"GET", "/repos/acme", 200},
		{"POST", "/repos/acme/widget/issues", 200},
		{"POST", "/repos/acme/widget/pulls", 403},
		{"DELETE", "/repos/acme/widget", 403},
		{"GET", "/repos/other/x", 403},
		{"GET", "/repos/acme/../other/x", 403},
		{"GET", "/repos/acme/%2e%2e/other", 403},
		{"GET", "/repos/acme%2fwidget", 403},
	} {
		before := len(up.all())
		req, _ := http.NewRequest(tc.method, "https://api.example.com"+tc.path, nil)
		req.URL.RawPath = tc.path // send the path as written, dots and escapes included
		req.URL.Opaque = "//api.example.com" + tc.path
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", tc.method, tc.path, err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s %s: %d, want %d (reason %q)", tc.method, tc.path, resp.StatusCode, tc.want, resp.Header.Get(ReasonHeader))
		}
		reached := len(up.all()) > before
		if reached != (tc.want == 200) {
			t.Errorf("%s %s: reached the upstream = %v", tc.method, tc.path, reached)
		}
		if tc.want == 403 && resp.Header.Get(ReasonHeader) == "" {
			t.Errorf("%s %s: a refusal without %s", tc.method, tc.path, ReasonHeader)
		}
	}
	if !containsDenial(p.Denials(), "DELETE", "matches no request rule") {
		t.Errorf("denials %q do not record the refused DELETE", p.Denials())
	}
}

func TestAnInspectedTunnelCarriesOnlyItsOwnHost(t *testing.T) {
	srv, up := httpsUpstream(t, nil)
	p, addr := inspectingProxy(t, srv, nil, Config{Allow: []string{"api.example.com", "other.example.com"}, Inspect: []string{"api.example.com"}})
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.CACert())
	conn, br := connect(t, addr, "api.example.com:443")
	_ = br
	tc := tls.Client(conn, &tls.Config{RootCAs: pool, ServerName: "api.example.com"})
	fmt.Fprintf(tc, "GET / HTTP/1.1\r\nHost: other.example.com\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a fronted Host got %d, want 403", resp.StatusCode)
	}
	if len(up.all()) != 0 {
		t.Errorf("the fronted request reached the upstream")
	}
}

func TestAStreamedResponseArrivesEventByEvent(t *testing.T) {
	release := make(chan struct{})
	srv, _ := httpsUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: one\n\n")
		w.(http.Flusher).Flush()
		select { // the second event waits until the client has the first
		case <-release:
		case <-time.After(10 * time.Second):
		}
		fmt.Fprint(w, "data: two\n\n")
	})
	p, addr := inspectingProxy(t, srv, nil, Config{Allow: []string{"api.example.com"}, Inspect: []string{"api.example.com"}})
	for _, h2 := range []bool{false, true} {
		resp, err := sandboxClient(t, p, addr, h2).Get("https://api.example.com/x/events")
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(resp.Body)
		got := make(chan string, 1)
		go func() { line, _ := br.ReadString('\n'); got <- line }()
		select {
		case line := <-got:
			if line != "data: one\n" {
				t.Errorf("first line %q", line)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("h2=%v: the first event did not arrive before the stream ended: the proxy buffers", h2)
		}
		release <- struct{}{}
		rest, _ := io.ReadAll(br)
		resp.Body.Close()
		if string(rest) != "\ndata: two\n\n" {
			t.Errorf("rest %q", rest)
		}
	}
}

func TestNonInspectedHostsKeepTheTunnel(t *testing.T) {
	srv, _ := httpsUpstream(t, nil)
	p, addr := inspectingProxy(t, srv, nil, Config{Allow: []string{"api.example.com", "other.example.com"}, Inspect: []string{"other.example.com"}})
	// The client trusts the upstream, not the session CA: it works only if
	// the proxy does not terminate TLS.
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	c := proxiedClient(t, addr, &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}})
	resp, body := get(t, c, "GET", "https://api.example.com/", nil, "")
	if resp.StatusCode != 200 || resp.TLS.PeerCertificates[0].Equal(srv.Certificate()) == false {
		t.Errorf("tunnelled: %d %q, certificate from the upstream = %v", resp.StatusCode, body, resp.TLS.PeerCertificates[0].Equal(srv.Certificate()))
	}
	_ = p
}

func TestNewRejectsBadInspection(t *testing.T) {
	t.Setenv("AGENTBOX_TEST_EMPTY", "")
	for name, cfg := range map[string]Config{
		"inspection of an unlisted host": {Allow: []string{"a.example.com"}, Inspect: []string{"b.example.com"}},
		"a rule for an unlisted host":    {Allow: []string{"a.example.com"}, Rules: []sandbox.RequestRule{{Host: "b.example.com"}}},
		"a secret from an unset variable": {Allow: []string{"a.example.com"}, Secrets: []sandbox.Credential{
			{Host: "a.example.com", Kind: sandbox.CredBearer, Source: "env:AGENTBOX_TEST_EMPTY"}}},
		"a secret from a failing command": {Allow: []string{"a.example.com"}, Secrets: []sandbox.Credential{
			{Host: "a.example.com", Kind: sandbox.CredBearer, Source: "cmd:echo " + testSecret + "; exit 3"}}},
	} {
		_, err := New(Config{Allow: cfg.Allow, Inspect: cfg.Inspect, Rules: cfg.Rules, Secrets: cfg.Secrets, Logger: slog.New(slog.DiscardHandler)})
		if err == nil {
			t.Errorf("%s: New succeeded", name)
			continue
		}
		if strings.Contains(err.Error(), testSecret) {
			t.Errorf("%s: the error %q holds the command's secret", name, err)
		}
	}
}

func TestGlobMatch(t *testing.T) {
	for _, tc := range []struct {
		glob, path string
		want       bool
	}{
		{"/repos/acme/**", "/repos/acme", true},
		{"/repos/acme/**", "/repos/acme/a/b/c", true},
		{"/repos/acme/**", "/repos/acmex", false},
		{"/repos/*/issues", "/repos/a/issues", true},
		{"/repos/*/issues", "/repos/a/b/issues", false},
		{"/a/**/z", "/a/z", true},
		{"/a/**/z", "/a/b/c/z", true},
		{"/a/**/z", "/a/b/c/y", false},
		{"/v1/chat/completions", "/v1/chat/completions", true},
	} {
		if got := globMatch(tc.glob, tc.path); got != tc.want {
			t.Errorf("globMatch(%q, %q) = %v, want %v", tc.glob, tc.path, got, tc.want)
		}
	}
}

func TestCloseEndsInspectedConnections(t *testing.T) {
	srv, _ := httpsUpstream(t, nil)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	p, err := New(Config{
		Allow: []string{"api.example.com"}, Inspect: []string{"api.example.com"}, UpstreamRoots: roots,
		Dial:   routes{"api.example.com:443": srv.Listener.Addr().String()}.dial,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- p.Serve(l) }()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.CACert())
	conn, _ := connect(t, l.Addr().String(), "api.example.com:443")
	tc := tls.Client(conn, &tls.Config{RootCAs: pool, ServerName: "api.example.com"})
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	_ = tc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := tc.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("an inspected connection outlived Close: read gave %v", err)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("Serve did not return after Close")
	}
}

func TestSecretsNeverGoOutInClearText(t *testing.T) {
	t.Setenv("AGENTBOX_TEST_TOKEN", testSecret)
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "auth=%q key=%q", r.Header.Get("Authorization"), r.Header.Get("X-Api-Key"))
	}))
	defer plain.Close()
	p, addr := startProxy(t, Config{
		Allow: []string{"api.example.com"},
		Dial:  routes{"api.example.com:80": plain.Listener.Addr().String()}.dial,
		Secrets: []sandbox.Credential{
			{Host: "api.example.com", Kind: sandbox.CredBearer, Source: "env:AGENTBOX_TEST_TOKEN"},
			{Host: "api.example.com", Kind: sandbox.CredPlaceholder, Name: "API_KEY", Source: "env:AGENTBOX_TEST_TOKEN"},
		},
	})
	ph := p.Placeholders()["API_KEY"]
	resp, body := get(t, proxiedClient(t, addr, nil), "GET", "http://api.example.com/", map[string]string{"X-Api-Key": ph}, "")
	if resp.StatusCode != 200 || strings.Contains(body, testSecret) || body != fmt.Sprintf("auth=%q key=%q", "", ph) {
		t.Errorf("plain HTTP to the secret's host: %d %q, want no secret and the placeholder left as is", resp.StatusCode, body)
	}
}

func TestTheSessionCAIsShortLivedAndSignsOnlyLeaves(t *testing.T) {
	now := time.Now()
	a, err := newAuthority(now)
	if err != nil {
		t.Fatal(err)
	}
	if !a.cert.IsCA || !a.cert.MaxPathLenZero || a.cert.NotAfter.After(now.Add(8*24*time.Hour)) {
		t.Errorf("CA: IsCA %v, MaxPathLenZero %v, NotAfter %v", a.cert.IsCA, a.cert.MaxPathLenZero, a.cert.NotAfter)
	}
	leaf, err := a.leaf("api.example.com")
	if err != nil {
		t.Fatal(err)
	}
	again, _ := a.leaf("api.example.com")
	if leaf != again {
		t.Errorf("the leaf is not cached")
	}
	cert, err := x509.ParseCertificate(leaf.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(a.cert)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: "api.example.com"}); err != nil {
		t.Errorf("the leaf does not verify for its host: %v", err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: "other.example.com"}); err == nil {
		t.Errorf("the leaf verifies for another host")
	}
	if cert.IsCA {
		t.Errorf("a leaf is a CA")
	}
}
