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
	"strings"
	"syscall"
	"testing"
	"time"
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
