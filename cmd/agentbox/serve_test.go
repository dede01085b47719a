package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// serveEnv is a real agentbox serve on a unix socket, with its data, the
// native backend's state and the CLI's own registry in the test's
// directories.
type serveEnv struct {
	t     *testing.T
	bin   string
	home  string // AGENTBOX_HOME of the CLI commands run against it
	data  string // --data
	state string // AGENTBOX_STATE_DIR of the server's linux backend
	sock  string
	cmd   *exec.Cmd
	done  chan struct{}
}

// startServe starts agentbox serve with args on a new socket over data
// and state (the directories of an earlier server, to restart it). It
// deletes its sessions when it stops (--close-on-exit), so a test leaves
// nothing behind unless it kills the server.
func startServe(t *testing.T, data, state string, args ...string) *serveEnv {
	t.Helper()
	requireLinuxSandbox(t)
	e := &serveEnv{t: t, bin: agentboxBinary(t), home: t.TempDir(), data: data, state: state}
	// A socket path must stay short (108 bytes): t.TempDir can be long.
	dir, err := os.MkdirTemp("", "abx-serve-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	e.sock = filepath.Join(dir, "s.sock")
	e.cmd = exec.Command(e.bin, append([]string{"serve", "--listen", "unix:" + e.sock, "--data", data, "--close-on-exit"}, args...)...)
	e.cmd.Env = append(os.Environ(), "AGENTBOX_STATE_DIR="+state, "AGENTBOX_HOME="+e.home)
	stderr, err := e.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	e.done = make(chan struct{})
	go func() {
		lines := bufio.NewScanner(stderr)
		lines.Buffer(nil, 1<<20)
		for lines.Scan() {
			if l := lines.Text(); !strings.Contains(l, `"msg":"audit"`) {
				t.Logf("agentbox serve: %s", l)
			}
		}
		_ = e.cmd.Wait()
		close(e.done)
	}()
	t.Cleanup(func() {
		_ = e.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-e.done:
		case <-time.After(time.Minute):
			_ = e.cmd.Process.Kill()
			<-e.done
		}
	})
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := e.client().Get("http://agentbox/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return e
			}
		}
		select {
		case <-e.done:
			t.Fatal("agentbox serve exited before it was ready")
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("agentbox serve not ready after a minute: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill9 kills the server as a crash would, and waits for it to be gone.
func (e *serveEnv) kill9() {
	e.t.Helper()
	if err := e.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		e.t.Fatal(err)
	}
	<-e.done
}

// client is an HTTP client of the server's socket.
func (e *serveEnv) client() *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", e.sock)
		},
		MaxIdleConnsPerHost: 64,
	}}
}

// token makes an API key of tenant with agentbox serve token create.
func (e *serveEnv) token(tenant string) string {
	e.t.Helper()
	out, err := exec.Command(e.bin, "serve", "token", "create", "--tenant", tenant, "--data", e.data).Output()
	if err != nil {
		e.t.Fatalf("serve token create: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// do sends one API request with tok and returns the status and body.
func (e *serveEnv) do(tok, method, path string, body string) (int, []byte) {
	e.t.Helper()
	req, err := http.NewRequest(method, "http://agentbox"+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := e.client().Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}

// cli runs agentbox with the remote backend on this server as tok's
// tenant.
func (e *serveEnv) cli(tok string, args ...string) (string, string, int) {
	e.t.Helper()
	cmd := exec.Command(e.bin, args...)
	cmd.Env = append(os.Environ(), "AGENTBOX_HOME="+e.home, "AGENTBOX_SERVER=unix:"+e.sock, "AGENTBOX_TOKEN="+tok)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		e.t.Fatalf("run agentbox %q: %v", args, err)
	}
	return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
}

func (e *serveEnv) cliOK(tok string, args ...string) string {
	e.t.Helper()
	out, stderr, code := e.cli(tok, args...)
	if code != 0 {
		e.t.Fatalf("agentbox %q: exit %d: %s", args, code, stderr)
	}
	return out
}

// lsStatus is the status agentbox session ls gives session id.
func (e *serveEnv) lsStatus(tok, id string) string {
	e.t.Helper()
	var rows []struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	out := e.cliOK(tok, "session", "ls", "--json")
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		e.t.Fatalf("session ls --json: %v: %s", err, out)
	}
	for _, r := range rows {
		if r.ID == id {
			return r.Status
		}
	}
	e.t.Fatalf("session ls does not list %s: %s", id, out)
	return ""
}

func TestSessionLsSaysWhatTheServerSaysOfRemoteSessions(t *testing.T) {
	e := startServe(t, t.TempDir(), t.TempDir())
	tok := e.token("acme")
	id := strings.TrimSpace(e.cliOK(tok, "session", "create", "--backend", "remote"))
	if got := e.lsStatus(tok, id); got != "running" {
		t.Fatalf("a live remote session is %q, want running", got)
	}
	e.cliOK(tok, "session", "pause", id)
	if got := e.lsStatus(tok, id); got != "paused" {
		t.Fatalf("a paused remote session is %q, want paused", got)
	}
	e.cliOK(tok, "session", "unpause", id)
	if out := e.cliOK(tok, "exec", "--session", id, "--", "echo", "hi"); strings.TrimSpace(out) != "hi" {
		t.Fatalf("exec after unpause = %q", out)
	}
	if status, body := e.do(tok, "DELETE", "/v1/sessions/"+id, ""); status != http.StatusNoContent {
		t.Fatalf("delete through the API: %d %s", status, body)
	}
	if got := e.lsStatus(tok, id); got != "gone" {
		t.Fatalf("a session the server deleted is %q, want gone", got)
	}
	e.kill9()
	if got := e.lsStatus(tok, id); got != "unknown" {
		t.Fatalf("with the server down the session is %q, want unknown", got)
	}
}

// bearerOn adds a bearer token to every request of base.
type bearerOn struct {
	base  http.RoundTripper
	token string
}

func (b bearerOn) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// mcpClient connects the MCP SDK's client to the tenant of tok at the
// server's /v1/mcp.
func (e *serveEnv) mcpClient(tok string) *mcpEnv {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := sdk.NewClient(&sdk.Implementation{Name: "serve-test", Version: "v0"}, nil)
	hc := &http.Client{Transport: bearerOn{base: e.client().Transport, token: tok}}
	cs, err := client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: "http://agentbox/v1/mcp", HTTPClient: hc}, nil)
	if err != nil {
		e.t.Fatalf("connect to /v1/mcp: %v", err)
	}
	e.t.Cleanup(func() { _ = cs.Close() })
	return &mcpEnv{t: e.t, cs: cs}
}

// sessions are the ids GET /v1/sessions lists for tok's tenant.
func (e *serveEnv) sessions(tok string) []string {
	e.t.Helper()
	status, body := e.do(tok, "GET", "/v1/sessions", "")
	if status != http.StatusOK {
		e.t.Fatalf("GET /v1/sessions: %d %s", status, body)
	}
	var l struct {
		Sessions []struct {
			ID string `json:"id"`
		} `json:"sessions"`
	}
	if err := json.Unmarshal(body, &l); err != nil {
		e.t.Fatal(err)
	}
	var ids []string
	for _, s := range l.Sessions {
		ids = append(ids, s.ID)
	}
	return ids
}

func TestMCPIsARouteOfServePerTenant(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "serve.yaml")
	if err := os.WriteFile(cfg, []byte("tenants:\n  acme: {sessions: 2}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := startServe(t, t.TempDir(), t.TempDir(), "--config", cfg)
	acme, other := e.token("acme"), e.token("other")

	// No key, a wrong key: refused before MCP sees anything.
	for _, tok := range []string{"", "abx_nope_nope"} {
		status, body := e.do(tok, "POST", "/v1/mcp", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`)
		if status != http.StatusUnauthorized {
			t.Fatalf("POST /v1/mcp with key %q: %d %s, want 401", tok, status, body)
		}
	}

	m := e.mcpClient(acme)
	tools, err := m.cs.ListTools(context.Background(), nil)
	if err != nil || len(tools.Tools) == 0 {
		t.Fatalf("list tools: %v %v", tools, err)
	}
	out := m.ok("sandbox_create", map[string]any{})
	id := sessionID(t, out)
	if got := m.ok("exec", map[string]any{"session_id": id, "cmd": "echo from mcp > f.txt; cat f.txt"}); !strings.Contains(got, "from mcp") {
		t.Fatalf("exec = %q", got)
	}
	m.refused("read_file", map[string]any{"session_id": id, "path": "../../etc/shadow"}, "workspace")

	// The session is the tenant's: listed, its file readable through the
	// API, and counted in its quota.
	if ids := e.sessions(acme); len(ids) != 1 || ids[0] != id {
		t.Fatalf("acme lists %v, want [%s]", ids, id)
	}
	if status, body := e.do(acme, "GET", "/v1/sessions/"+id+"/files?path=f.txt", ""); status != http.StatusOK || string(body) != "from mcp\n" {
		t.Fatalf("the MCP session's file through the API: %d %q", status, body)
	}
	m.ok("sandbox_create", map[string]any{})
	m.refused("sandbox_create", map[string]any{}, "live sessions: limit 2")

	// Invisible to another tenant, over the API and over its own MCP.
	if ids := e.sessions(other); len(ids) != 0 {
		t.Fatalf("tenant other lists %v", ids)
	}
	if status, _ := e.do(other, "GET", "/v1/sessions/"+id, ""); status != http.StatusNotFound {
		t.Fatalf("tenant other on acme's MCP session: %d, want 404", status)
	}
	o := e.mcpClient(other)
	o.refused("exec", map[string]any{"session_id": id, "cmd": "true"}, id)
	if out := o.ok("sandbox_list", map[string]any{}); strings.Contains(out, id) {
		t.Fatalf("tenant other's sandbox_list shows acme's session: %s", out)
	}

	// The MCP client leaves: its sessions are deleted on the server.
	if err := m.cs.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(e.sessions(acme)) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("acme's MCP sessions left after its client went: %v", e.sessions(acme))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A server killed with SIGKILL while 20 commands run, then started again on
// the same data, finds every session, running and usable with its files.
func TestServeKilledDuringConcurrentExecsFindsEverySessionAgain(t *testing.T) {
	const n = 20
	cfg := filepath.Join(t.TempDir(), "serve.yaml")
	if err := os.WriteFile(cfg, []byte("defaults: {sessions: 30}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	data, state := t.TempDir(), t.TempDir()
	first := startServe(t, data, state, "--config", cfg)
	tok := first.token("acme")
	var ids []string
	for i := range n {
		status, body := first.do(tok, "POST", "/v1/sessions", "{}")
		if status != http.StatusCreated {
			t.Fatalf("create session %d: %d %s", i, status, body)
		}
		var s struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(body, &s); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s.ID)
		if status, body := first.do(tok, "PUT", "/v1/sessions/"+s.ID+"/files?path=kept.txt", "kept "+s.ID); status != http.StatusNoContent {
			t.Fatalf("write in %s: %d %s", s.ID, status, body)
		}
	}
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() {
			req, _ := http.NewRequest("POST", "http://agentbox/v1/sessions/"+id+"/exec", strings.NewReader(`{"cmd": ["sh", "-c", "echo started > started; sleep 30"]}`))
			req.Header.Set("Authorization", "Bearer "+tok)
			if resp, err := first.client().Do(req); err == nil {
				resp.Body.Close() // the server dies first; nothing to check
			}
		})
	}
	for _, id := range ids {
		deadline := time.Now().Add(time.Minute)
		for {
			if status, _ := first.do(tok, "GET", "/v1/sessions/"+id+"/stat?path=started", ""); status == http.StatusOK {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the command in %s did not start", id)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	first.kill9()
	wg.Wait()

	second := startServe(t, data, state, "--config", cfg)
	listed := second.sessions(tok)
	slices.Sort(listed)
	want := slices.Clone(ids)
	slices.Sort(want)
	if !slices.Equal(listed, want) {
		t.Fatalf("after the restart the tenant lists %v, want %v", listed, want)
	}
	for _, id := range ids {
		status, body := second.do(tok, "GET", "/v1/sessions/"+id, "")
		if status != http.StatusOK || !strings.Contains(string(body), `"status": "running"`) {
			t.Fatalf("session %s after the restart: %d %s", id, status, body)
		}
		status, body = second.do(tok, "POST", "/v1/sessions/"+id+"/exec", `{"cmd": ["cat", "kept.txt"]}`)
		if status != http.StatusOK || !strings.Contains(string(body), `"stdout": "kept `+id+`"`) {
			t.Fatalf("exec in %s after the restart: %d %s", id, status, body)
		}
	}
}

// A server killed with SIGKILL leaves its warm pool's sessions running:
// they are detached, so that one handed out outlives the server. The next
// server on the same data ends those no tenant was given, and keeps the
// one that was.
func TestServeEndsThePooledSessionsAKilledServerLeft(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "serve.yaml")
	if err := os.WriteFile(cfg, []byte("tenants: {acme: {pool: 2, sessions: 5}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	data, state := t.TempDir(), t.TempDir()
	// inState lists the native sessions in the backend's state directory
	// (each has a directory named by its ID, and one for its workspace).
	inState := func() []string {
		entries, err := os.ReadDir(state)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, e := range entries {
			if e.IsDir() && !strings.Contains(e.Name(), ".") {
				ids = append(ids, e.Name())
			}
		}
		return ids
	}
	waitFor := func(n int) []string {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for {
			if ids := inState(); len(ids) == n {
				return ids
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d sessions in the state directory after a minute, want %d: %v", len(inState()), n, inState())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	// poolReady waits until the server's metrics (on its admin socket)
	// say the pool holds two sessions: each is then in the registry.
	poolReady := func() {
		t.Helper()
		admin := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", filepath.Join(data, "admin.sock"))
		}}}
		deadline := time.Now().Add(time.Minute)
		for {
			var body []byte
			resp, err := admin.Get("http://agentbox/metrics")
			if err == nil {
				body, _ = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			if strings.Contains(string(body), `agentbox_pool_ready{tenant="acme"} 2`) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the pool is not full after a minute: %v %s", err, body)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	first := startServe(t, data, state, "--config", cfg)
	tok := first.token("acme")
	first.sessions(tok) // the tenant's first request starts its pool
	poolReady()
	waitFor(2)
	status, body := first.do(tok, "POST", "/v1/sessions", "{}")
	if status != http.StatusCreated {
		t.Fatalf("create a session: %d %s", status, body)
	}
	var handed struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(body, &handed); err != nil {
		t.Fatal(err)
	}
	poolReady()
	pooled := slices.DeleteFunc(waitFor(3), func(id string) bool { return id == handed.ID })
	if len(pooled) != 2 {
		t.Fatalf("the handed-out session %s is not among %v", handed.ID, inState())
	}
	first.kill9()
	if got := inState(); len(got) != 3 {
		t.Fatalf("after the kill the state directory holds %v, want the 3 detached sessions", got)
	}

	second := startServe(t, data, state, "--config", cfg)
	for _, id := range pooled {
		if _, err := os.Stat(filepath.Join(state, id)); !os.IsNotExist(err) {
			t.Errorf("the pooled session %s the killed server left is still there (%v)", id, err)
		}
	}
	if got := second.sessions(tok); !slices.Equal(got, []string{handed.ID}) {
		t.Fatalf("after the restart the tenant lists %v, want only %s", got, handed.ID)
	}
	status, body = second.do(tok, "POST", "/v1/sessions/"+handed.ID+"/exec", `{"cmd": ["true"]}`)
	if status != http.StatusOK {
		t.Fatalf("exec in the handed-out session after the restart: %d %s", status, body)
	}
}
