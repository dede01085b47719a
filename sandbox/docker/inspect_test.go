package docker

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/egress"
)

func TestInspectedHTTPSFromADockerSandbox(t *testing.T) {
	testenv.NeedDocker(t, engineErr)
	const head, tail = "sk-live-", "docker-5e3c"
	var mu sync.Mutex
	var saw []string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		saw = append(saw, fmt.Sprintf("%s %s %s auth=%q key=%q", r.Method, r.Host, r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("X-Api-Key")))
		mu.Unlock()
		fmt.Fprintf(w, "%s %s", r.Method, r.URL.Path)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	c, err := New(Options{EgressUpstream: egress.Upstream{Roots: roots, Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr != "api.example.com:443" && addr != "other.example.com:443" {
			return nil, fmt.Errorf("test: no route to %s", addr)
		}
		var d net.Dialer
		return d.DialContext(ctx, network, srv.Listener.Addr().String())
	}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if why := c.egressSupport(); why != "" {
		testenv.Skipf(t, "network.allowlist not enforceable here: %s", why)
	}
	t.Setenv("AGENTBOX_TEST_DOCKER_SECRET", head+tail)
	sess := newSession(t, c, sandbox.Spec{Policy: sandbox.Policy{Network: sandbox.NetworkPolicy{
		Mode:  sandbox.NetworkAllowList,
		Allow: []string{"api.example.com", "other.example.com"},
		Rules: []sandbox.RequestRule{{Host: "other.example.com", Methods: []string{"GET"}}},
		Secrets: []sandbox.Credential{
			{Host: "api.example.com", PathPrefix: "/v1", Kind: sandbox.CredBearer, Source: "env:AGENTBOX_TEST_DOCKER_SECRET"},
			{Host: "api.example.com", PathPrefix: "/ph", Kind: sandbox.CredPlaceholder, Name: "API_KEY", Source: "env:AGENTBOX_TEST_DOCKER_SECRET"},
		},
	}}})
	py := func(url string, headers string) string {
		return fmt.Sprintf(`python3 -c '
import os, urllib.request, urllib.error
req = urllib.request.Request(%q, headers=%s, method="GET" if "post" not in %q else "POST")
try:
    print(urllib.request.urlopen(req, timeout=20).read().decode())
except urllib.error.HTTPError as e:
    print(e.code, e.headers.get("X-Agentbox-Egress-Reason"))
'`, url, headers, url)
	}
	for _, tc := range []struct{ name, script, want string }{
		{"the bearer is added to HTTPS", py("https://api.example.com/v1/models", "{}"), "GET /v1/models\n"},
		{"the placeholder is swapped toward its host", py("https://api.example.com/ph/chat", `{"X-Api-Key": os.environ["API_KEY"]}`), "GET /ph/chat\n"},
		{"the placeholder toward another host is refused", py("https://other.example.com/", `{"X-Api-Key": os.environ["API_KEY"]}`), "403 "},
		{"a method the rules do not admit is refused", py("https://other.example.com/post", "{}"), "403 POST /post matches no request rule"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, sess, tc.script)
			if !strings.HasPrefix(string(res.Stdout), tc.want) {
				t.Errorf("stdout %q, want prefix %q (stderr %q)", res.Stdout, tc.want, res.Stderr)
			}
		})
	}
	mu.Lock()
	got := strings.Join(saw, "\n")
	mu.Unlock()
	for _, want := range []string{`/v1/models auth="Bearer ` + head + tail + `"`, `/ph/chat auth="" key="` + head + tail + `"`} {
		if !strings.Contains(got, want) {
			t.Errorf("upstream saw:\n%s\nwant %s", got, want)
		}
	}
	res := run(t, sess, `env; cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n'; grep -rl 'sk-liv[e]-docker' /etc /tmp 2>/dev/null; echo done`)
	if strings.Contains(string(res.Stdout), head+tail) || !strings.Contains(string(res.Stdout), "SSL_CERT_FILE=/etc/agentbox/ca-bundle.pem") {
		t.Errorf("the container's view:\n%s", res.Stdout)
	}
	st, _ := json.Marshal(sess.State())
	if strings.Contains(string(st), head+tail) || strings.Contains(string(st), "AGENTBOX_TEST_DOCKER_SECRET") {
		t.Errorf("the state holds the secret or its source: %s", st)
	}
}
