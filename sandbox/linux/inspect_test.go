package linux

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/egress"
	"github.com/agentbox/agentbox/snapshot"
)

// The secret is built so that no command line in these tests spells it:
// searches inside the sandbox look for it through a bracket expression.
const (
	secretHead = "sk-live-"
	secretTail = "9f8e7d6c5b4a"
	secretGrep = "sk-liv[e]-9f8e7d6c5b4a"
)

// upstreamSaw records what the loopback HTTPS upstream received.
type upstreamSaw struct {
	mu       sync.Mutex
	lines    []string
	released chan struct{}
}

func (u *upstreamSaw) add(s string) {
	u.mu.Lock()
	u.lines = append(u.lines, s)
	u.mu.Unlock()
}

func (u *upstreamSaw) text() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return strings.Join(u.lines, "\n")
}

// inspectUpstream serves, over HTTPS with HTTP/2, what the sandbox asks
// api.example.com and other.example.com for: /git/ is a real git
// repository (git http-backend), /sse a two-event stream whose second
// event waits for /release, anything else an echo of the request line.
func inspectUpstream(t *testing.T) (*httptest.Server, *upstreamSaw) {
	t.Helper()
	backend := testenv.NeedCommand(t, "git")
	httpBackend := filepath.Join(filepath.Dir(backend), "..", "lib", "git-core", "git-http-backend")
	if out, err := exec.Command("git", "--exec-path").Output(); err == nil {
		httpBackend = filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	}
	repos := t.TempDir()
	repo := filepath.Join(repos, "repo.git")
	for _, args := range [][]string{
		{"init", "-q", "-b", "main", filepath.Join(repos, "src")},
		{"-C", filepath.Join(repos, "src"), "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "through the proxy"},
		{"clone", "-q", "--bare", filepath.Join(repos, "src"), repo},
	} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	saw := &upstreamSaw{released: make(chan struct{}, 1)}
	git := &cgi.Handler{Path: httpBackend, Env: []string{"GIT_PROJECT_ROOT=" + repos, "GIT_HTTP_EXPORT_ALL=1"}}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		saw.add(fmt.Sprintf("%s %s %s HTTP/%d auth=%q key=%q", r.Method, r.Host, r.URL.Path, r.ProtoMajor, r.Header.Get("Authorization"), r.Header.Get("X-Api-Key")))
		switch {
		case strings.HasPrefix(r.URL.Path, "/git/"):
			r2 := r.Clone(r.Context())
			r2.URL.Path = strings.TrimPrefix(r.URL.Path, "/git")
			git.ServeHTTP(w, r2)
		case r.URL.Path == "/sse":
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: one\n\n")
			w.(http.Flusher).Flush()
			select {
			case <-saw.released:
				fmt.Fprint(w, "data: two\n\n")
			case <-time.After(10 * time.Second):
				fmt.Fprint(w, "data: late\n\n")
			}
		case r.URL.Path == "/release":
			saw.released <- struct{}{}
		default:
			fmt.Fprintf(w, "%s %s over HTTP/%d\n", r.Method, r.URL.Path, r.ProtoMajor)
		}
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, saw
}

func TestInspectedHTTPSFromANativeSandbox(t *testing.T) {
	for _, tool := range []string{"curl", "python3", "git"} {
		testenv.NeedCommand(t, tool)
	}
	srv, saw := inspectUpstream(t)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	up := srv.Listener.Addr().String()
	var logs bytes.Buffer
	storeDir := t.TempDir()
	store, err := snapshot.Open(storeDir, snapshot.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{
		StateDir:  t.TempDir(),
		Snapshots: store,
		Logger:    slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		EgressUpstream: egress.Upstream{Roots: roots, Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if addr != "api.example.com:443" && addr != "other.example.com:443" {
				return nil, fmt.Errorf("test: no route to %s", addr)
			}
			var d net.Dialer
			return d.DialContext(ctx, network, up)
		}},
	}
	c := newTestClientWith(t, opts)
	if !hasPart(c, sandbox.PartNetworkAllowList) {
		testenv.Skipf(t, "no egress proxy")
	}
	t.Setenv("AGENTBOX_TEST_API_SECRET", secretHead+secretTail)
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte(secretHead+secretTail+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rule, err := sandbox.ParseRequestRule("GET other.example.com/allowed/**")
	if err != nil {
		t.Fatal(err)
	}
	spec := sandbox.Spec{Policy: sandbox.Policy{Network: sandbox.NetworkPolicy{
		Mode:  sandbox.NetworkAllowList,
		Allow: []string{"api.example.com", "other.example.com"},
		Rules: []sandbox.RequestRule{rule},
		Secrets: []sandbox.Credential{
			{Host: "api.example.com", PathPrefix: "/v1", Kind: sandbox.CredBearer, Source: "env:AGENTBOX_TEST_API_SECRET"},
			{Host: "api.example.com", PathPrefix: "/git", Kind: sandbox.CredBasic, Source: "file:" + keyFile},
			{Host: "api.example.com", PathPrefix: "/ph", Kind: sandbox.CredPlaceholder, Name: "API_KEY", Source: "cmd:cat " + keyFile},
		},
	}}}
	s := newTestSession(t, c, spec)
	sh := func(script string) sandbox.ExecResult {
		t.Helper()
		res, err := sandbox.Exec(context.Background(), s, sandbox.ExecRequest{Cmd: []string{"sh", "-c", script}, Timeout: 30 * time.Second})
		if err != nil {
			t.Fatalf("%s: %v", script, err)
		}
		return res
	}

	t.Run("curl gets the bearer over HTTP/2", func(t *testing.T) {
		res := sh(`curl -sS --http2 -w ' %{http_version}' https://api.example.com/v1/models`)
		if res.ExitCode != 0 || string(res.Stdout) != "GET /v1/models over HTTP/2\n 2" {
			t.Fatalf("curl: %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
		}
		if !strings.Contains(saw.text(), `GET api.example.com /v1/models HTTP/2 auth="Bearer `+secretHead+secretTail+`"`) {
			t.Errorf("upstream saw:\n%s", saw.text())
		}
	})
	t.Run("python urllib trusts the session CA", func(t *testing.T) {
		res := sh(`python3 -c 'import urllib.request; print(urllib.request.urlopen("https://api.example.com/v1/py").read().decode().strip())'`)
		if res.ExitCode != 0 || string(res.Stdout) != "GET /v1/py over HTTP/2\n" {
			t.Fatalf("python: %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
		}
	})
	t.Run("git clones over HTTPS with basic auth added", func(t *testing.T) {
		res := sh(`cd /tmp && git clone -q https://api.example.com/git/repo.git && git -C repo log --format=%s`)
		if res.ExitCode != 0 || string(res.Stdout) != "through the proxy\n" {
			t.Fatalf("git: %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
		}
		if !strings.Contains(saw.text(), "/git/repo.git/info/refs HTTP/2 auth=\"Basic ") {
			t.Errorf("upstream saw no basic auth on the clone:\n%s", saw.text())
		}
	})
	t.Run("the placeholder is swapped toward its host only", func(t *testing.T) {
		res := sh(`case "$API_KEY" in agentbox-ph-*) ;; *) echo "API_KEY=$API_KEY"; exit 1;; esac
curl -sS -H "X-Api-Key: $API_KEY" https://api.example.com/ph/chat`)
		if res.ExitCode != 0 || !strings.Contains(saw.text(), `/ph/chat HTTP/2 auth="" key="`+secretHead+secretTail+`"`) {
			t.Fatalf("%d %q %q; upstream saw:\n%s", res.ExitCode, res.Stdout, res.Stderr, saw.text())
		}
		res = sh(`curl -sS -o /dev/null -w '%{http_code}' -H "X-Api-Key: $API_KEY" https://other.example.com/allowed/x`)
		if string(res.Stdout) != "403" || !strings.Contains(strings.Join(res.Violations, "\n"), "exfiltration") {
			t.Errorf("the placeholder toward another host: %q, violations %q", res.Stdout, res.Violations)
		}
	})
	t.Run("method and path rules", func(t *testing.T) {
		res := sh(`curl -sS -o /dev/null -w '%{http_code} ' https://other.example.com/allowed/a; curl -sS -D - -o /dev/null -X POST https://other.example.com/allowed/a | grep -i '^x-agentbox-egress-reason'; curl -sS -o /dev/null -w '%{http_code}' https://other.example.com/elsewhere`)
		out := string(res.Stdout)
		if !strings.HasPrefix(out, "200 ") || !strings.Contains(out, "matches no request rule") || !strings.HasSuffix(out, "403") {
			t.Errorf("rules: %q %q", out, res.Stderr)
		}
		if v := strings.Join(res.Violations, "\n"); !strings.Contains(v, "POST /allowed/a matches no request rule") || !strings.Contains(v, "GET /elsewhere") {
			t.Errorf("violations %q", v)
		}
	})
	t.Run("a client that pins the upstream fails with a clear violation", func(t *testing.T) {
		pinned := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
		if err := s.WriteFile(context.Background(), "pinned.pem", pinned, 0o644); err != nil {
			t.Fatal(err)
		}
		res := sh(`curl -sS --cacert pinned.pem https://api.example.com/v1/x`)
		if res.ExitCode == 0 || !strings.Contains(strings.Join(res.Violations, "\n"), "pins certificates") {
			t.Errorf("pinned curl: exit %d, stderr %q, violations %q", res.ExitCode, res.Stderr, res.Violations)
		}
	})
	t.Run("a stream arrives event by event", func(t *testing.T) {
		// The second event is sent only once the first reached the sandbox
		// and it asked for /release: a buffering proxy would stall here.
		res := sh(`curl -sSN https://api.example.com/sse | while read -r line; do
  [ -n "$line" ] && echo "$line"
  [ "$line" = "data: one" ] && curl -sS https://api.example.com/release
done`)
		if string(res.Stdout) != "data: one\ndata: two\n" {
			t.Errorf("stream: %q %q", res.Stdout, res.Stderr)
		}
	})
	t.Run("nothing in the sandbox holds the secret", func(t *testing.T) {
		res := sh(`env; cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | tr '\0' '\n'; grep -rIl '` + secretGrep + `' /etc /tmp . 2>/dev/null; grep -l '` + secretGrep + `' /proc/[0-9]*/environ 2>/dev/null; echo done`)
		if strings.Contains(string(res.Stdout), secretHead+secretTail) || !strings.HasSuffix(string(res.Stdout), "done\n") {
			t.Errorf("the sandbox sees the secret:\n%s", res.Stdout)
		}
		for _, k := range egress.TrustEnv {
			if !strings.Contains(string(res.Stdout), k+"=/etc/agentbox/ca-bundle.pem\n") {
				t.Errorf("%s is not the trust bundle in:\n%s", k, res.Stdout)
			}
		}
	})
	if _, err := s.Snapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	st, err := json.Marshal(s.State())
	if err != nil {
		t.Fatal(err)
	}
	for what, text := range map[string]string{"the state": string(st), "the log": logs.String(), "the snapshot store": dirText(t, storeDir), "the state dir": dirText(t, opts.StateDir)} {
		if strings.Contains(text, secretHead+secretTail) || strings.Contains(text, keyFile) {
			t.Errorf("%s holds the secret or its source", what)
		}
	}

	// A resumed session gets a new proxy with a new CA; the init replaces
	// the bundle, so its commands trust the new one. (The secrets are
	// given again: a State never carries them.)
	rst, err := sandbox.UnmarshalState(st)
	if err != nil {
		t.Fatal(err)
	}
	rst.Spec.Policy.Network.Secrets = spec.Policy.Network.Secrets
	c2, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := c2.Resume(context.Background(), rst)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sandbox.Exec(context.Background(), s2, sandbox.ExecRequest{Cmd: []string{"curl", "-sS", "https://api.example.com/v1/resumed"}, Timeout: 30 * time.Second})
	if err != nil || string(res.Stdout) != "GET /v1/resumed over HTTP/2\n" {
		t.Errorf("after resume: %v %q %q", err, res.Stdout, res.Stderr)
	}
	if !strings.Contains(saw.text(), `/v1/resumed HTTP/2 auth="Bearer `+secretHead+secretTail+`"`) {
		t.Errorf("after resume the upstream saw:\n%s", saw.text())
	}
	if err := s2.Close(context.Background()); err != nil {
		t.Errorf("close the resumed session: %v", err)
	}
}

// dirText is every regular file under dir, concatenated: the state files
// are JSON, and a snapshot store's index and manifests are plain (its
// content, compressed, is the workspace, which the sandbox's own search
// above covers).
func dirText(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	_ = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			data, _ := os.ReadFile(p)
			b.Write(data)
		}
		return nil
	})
	return b.String()
}
