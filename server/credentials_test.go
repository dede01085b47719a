package server

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/egress"
	"github.com/agentbox/agentbox/sandbox/linux"
	"github.com/agentbox/agentbox/server/api"
)

// TestATenantsCredentialReachesItsHostAndNothingElse creates a session
// through the API whose allow-list admits a host the operator gave the
// tenant a credential for: the upstream gets it, the API client and the
// registry never do, and the client's own request rules apply.
func TestATenantsCredentialReachesItsHostAndNothingElse(t *testing.T) {
	testenv.NeedCommand(t, "curl")
	const secret = "sk-live-" + "server-71d2"
	var mu sync.Mutex
	var saw []string
	up := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		saw = append(saw, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		fmt.Fprint(w, "ok")
	}))
	defer up.Close()
	roots := x509.NewCertPool()
	roots.AddCert(up.Certificate())
	stateDir := t.TempDir()
	linuxBackend(t, stateDir) // skips where the backend cannot run
	backend := func(_ string, store sandbox.SnapshotStore) (sandbox.Client, error) {
		return linux.New(linux.Options{StateDir: stateDir, Snapshots: store, Logger: quiet(),
			EgressUpstream: egress.Upstream{Roots: roots, Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, network, up.Listener.Addr().String())
			}}})
	}
	t.Setenv("AGENTBOX_TEST_SERVER_SECRET", secret)
	data := t.TempDir()
	ts := startServer(t, data, backend, Config{Defaults: Limits{
		Network:     []string{"api.example.com"},
		Credentials: []string{"api.example.com=bearer:env:AGENTBOX_TEST_SERVER_SECRET"},
	}})
	tok := ts.key(t, "acme")
	var s api.Session
	ts.ok(t, tok, "POST", "/v1/sessions", api.CreateSession{Spec: sandbox.Spec{Policy: sandbox.Policy{Network: sandbox.NetworkPolicy{
		Mode: sandbox.NetworkAllowList, Allow: []string{"api.example.com"},
		Rules: []sandbox.RequestRule{{Host: "api.example.com", Methods: []string{"GET"}}},
	}}}}, http.StatusCreated, &s)
	var res api.ExecResult
	ts.ok(t, tok, "POST", "/v1/sessions/"+s.ID+"/exec", api.Exec{Cmd: []string{"sh", "-c",
		"curl -sS https://api.example.com/v1/a; echo; curl -sS -o /dev/null -w '%{http_code}' -X DELETE https://api.example.com/v1/a; echo; env"}}, http.StatusOK, &res)
	out := string(res.Stdout)
	if !strings.HasPrefix(out, "ok\n403\n") || strings.Contains(out, secret) {
		t.Errorf("exec: %q %q", out, res.Stderr)
	}
	if !strings.Contains(strings.Join(res.Violations, "\n"), "DELETE /v1/a matches no request rule") {
		t.Errorf("violations %q", res.Violations)
	}
	mu.Lock()
	got := strings.Join(saw, "\n")
	mu.Unlock()
	if got != "GET /v1/a Bearer "+secret {
		t.Errorf("upstream saw %q", got)
	}
	_, body := ts.call(t, tok, "GET", "/v1/sessions/"+s.ID, nil)
	if strings.Contains(string(body), secret) || strings.Contains(string(body), "AGENTBOX_TEST_SERVER_SECRET") {
		t.Errorf("the API shows the credential: %s", body)
	}
	for _, dir := range []string{data, stateDir} {
		_ = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
			if err != nil || !fi.Mode().IsRegular() {
				return nil
			}
			b, _ := os.ReadFile(p)
			if strings.Contains(string(b), secret) || strings.Contains(string(b), "AGENTBOX_TEST_SERVER_SECRET") {
				t.Errorf("%s holds the credential or its source", p)
			}
			return nil
		})
	}
}

func TestAConfigWithAMalformedCredentialIsRefused(t *testing.T) {
	p := filepath.Join(t.TempDir(), "server.yaml")
	if err := os.WriteFile(p, []byte("tenants:\n  acme:\n    network: [a.example.com]\n    credentials: ['a.example.com=bearer:value:sk-inline']\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := LoadConfig(p)
	if err == nil || !strings.Contains(err.Error(), "credentials") || strings.Contains(err.Error(), "sk-inline") {
		t.Errorf("LoadConfig = %v, want a refusal naming credentials without the value", err)
	}
}
