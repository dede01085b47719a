package main

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpEnv is an MCP client from the official SDK driving the real
// `agentbox mcp` over stdio, as a desktop agent's configuration starts it,
// with its data and the native backend's state in directories of the
// test's own.
type mcpEnv struct {
	t        *testing.T
	bin      string
	home     string
	stateDir string
	tmp      string // the server's TMPDIR
	traces   string
	progress atomic.Int64
	cs       *sdk.ClientSession
}

func startMCP(t *testing.T, args ...string) *mcpEnv {
	t.Helper()
	requireLinuxSandbox(t)
	e := &mcpEnv{t: t, bin: agentboxBinary(t), home: t.TempDir(), stateDir: t.TempDir(), tmp: t.TempDir()}
	e.traces = filepath.Join(e.home, "traces")
	e.connect(args...)
	return e
}

func (e *mcpEnv) env() []string {
	return append(os.Environ(), "AGENTBOX_HOME="+e.home, "AGENTBOX_STATE_DIR="+e.stateDir, "TMPDIR="+e.tmp)
}

func (e *mcpEnv) connect(args ...string) {
	e.t.Helper()
	cmd := exec.Command(e.bin, append([]string{"mcp", "--trace-dir", e.traces}, args...)...)
	cmd.Env = e.env()
	cmd.Stderr = &testLog{t: e.t}
	client := sdk.NewClient(&sdk.Implementation{Name: "agentbox-test", Version: "v0"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *sdk.ProgressNotificationClientRequest) { e.progress.Add(1) },
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		e.t.Fatalf("connect to agentbox mcp: %v", err)
	}
	e.cs = cs
	e.t.Cleanup(func() { _ = cs.Close() })
}

// call calls a tool and returns its text and whether it is a tool error;
// a protocol failure fails the test.
func (e *mcpEnv) call(name string, args map[string]any, meta ...sdk.Meta) (string, bool) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := &sdk.CallToolParams{Name: name, Arguments: args}
	if len(meta) > 0 {
		p.Meta = meta[0]
	}
	res, err := e.cs.CallTool(ctx, p)
	if err != nil {
		e.t.Fatalf("%s(%v): protocol failure (a tool's errors must come back as tool errors): %v", name, args, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError
}

// ok calls a tool and fails the test on a tool error.
func (e *mcpEnv) ok(name string, args map[string]any) string {
	e.t.Helper()
	out, isErr := e.call(name, args)
	if isErr {
		e.t.Fatalf("%s(%v): %s", name, args, out)
	}
	return out
}

// refused calls a tool and fails the test unless it is a tool error
// saying want.
func (e *mcpEnv) refused(name string, args map[string]any, want string) {
	e.t.Helper()
	out, isErr := e.call(name, args)
	if !isErr || !strings.Contains(out, want) {
		e.t.Fatalf("%s(%v) = %q (error %v), want a tool error saying %q", name, args, out, isErr, want)
	}
}

// sessionID is the id a sandbox_create answer names.
func sessionID(t *testing.T, out string) string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if id, ok := strings.CutPrefix(l, "session_id: "); ok {
			return strings.Fields(id)[0]
		}
	}
	t.Fatalf("no session_id in %q", out)
	return ""
}

// testLog forwards the server's stderr to the test log.
type testLog struct{ t *testing.T }

func (l *testLog) Write(p []byte) (int, error) {
	l.t.Logf("agentbox mcp: %s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func TestMCPClientListsTheSandboxTools(t *testing.T) {
	e := startMCP(t)
	res, err := e.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		if tool.Description == "" || tool.InputSchema == nil {
			t.Errorf("tool %s has no description or schema", tool.Name)
		}
	}
	for _, want := range []string{"sandbox_create", "sandbox_list", "sandbox_close", "exec", "write_stdin", "read_file", "write_file", "list_dir", "apply_patch", "snapshot_save", "snapshot_restore"} {
		if !slices.Contains(names, want) {
			t.Errorf("tools %v lack %s", names, want)
		}
	}
}

func TestMCPExecWithoutASessionMakesOneFromTheDefault(t *testing.T) {
	e := startMCP(t, "--memory", "256M")
	out := e.ok("exec", map[string]any{"cmd": "echo hello from $(pwd); id -u"})
	if !strings.Contains(out, "exit code: 0") || !strings.Contains(out, "hello from /workspace") || !strings.Contains(out, "1000") {
		t.Fatalf("exec = %q", out)
	}
	list := e.ok("sandbox_list", nil)
	if strings.Count(list, "session_id: ") != 1 || !strings.Contains(list, "memory 256.0 MiB") {
		t.Fatalf("sandbox_list after one exec = %q, want one sandbox under the ceiling", list)
	}
	// The second call reuses it: files persist.
	e.ok("exec", map[string]any{"cmd": []string{"sh", "-c", "echo kept > note"}})
	if out := e.ok("exec", map[string]any{"cmd": "cat note"}); !strings.Contains(out, "kept") {
		t.Fatalf("a second exec did not run in the same sandbox: %q", out)
	}
}

func TestMCPFilesRoundTripAndEscapesAreRefused(t *testing.T) {
	e := startMCP(t)
	id := sessionID(t, e.ok("sandbox_create", map[string]any{"network": "none"}))
	e.ok("write_file", map[string]any{"session_id": id, "path": "src/a.txt", "content": "one\ntwo\n"})
	e.ok("apply_patch", map[string]any{"session_id": id, "input": "*** Begin Patch\n*** Update File: src/a.txt\n one\n-two\n+three\n*** End Patch"})
	if out := e.ok("read_file", map[string]any{"session_id": id, "path": "src/a.txt"}); out != "one\nthree\n" {
		t.Fatalf("read_file after the patch = %q", out)
	}
	if out := e.ok("list_dir", map[string]any{"session_id": id, "path": "src"}); !strings.Contains(out, "a.txt") {
		t.Fatalf("list_dir = %q", out)
	}
	if out := e.ok("exec", map[string]any{"session_id": id, "cmd": "cat src/a.txt"}); !strings.Contains(out, "three") {
		t.Fatalf("the command does not see the written file: %q", out)
	}
	e.refused("read_file", map[string]any{"session_id": id, "path": "../../etc/shadow"}, "leaves the workspace")
	e.refused("write_file", map[string]any{"session_id": id, "path": "/etc/passwd", "content": "x"}, "outside")
	e.refused("read_file", map[string]any{"session_id": "nope", "path": "a"}, `no sandbox "nope"`)
}

func TestMCPTheModelMayAskForLessNeverMore(t *testing.T) {
	e := startMCP(t, "--memory", "512M", "--network", "none", "--timeout", "30s")
	e.refused("sandbox_create", map[string]any{"network": []string{"example.com"}}, "above the operator's ceiling (no network)")
	e.refused("sandbox_create", map[string]any{"memory": "1G"}, "memory 1073741824 bytes is above the operator's ceiling")
	e.refused("sandbox_create", map[string]any{"timeout_seconds": 3600}, "exec timeout 1h0m0s is above")
	id := sessionID(t, e.ok("sandbox_create", map[string]any{"memory": "128M", "timeout_seconds": 2}))
	out := e.ok("exec", map[string]any{"session_id": id, "cmd": "sleep 30", "timeout_seconds": 60})
	if !strings.Contains(out, "timed out") {
		t.Fatalf("a command asking 60s in a 2s sandbox = %q, want it killed at 2s", out)
	}
	// Host networking is refused outright, whatever the ceiling's mode.
	e.refused("sandbox_create", map[string]any{"network": []string{"*.com"}}, "above the operator's ceiling")
}

func TestMCPBadArgumentsAreToolErrors(t *testing.T) {
	e := startMCP(t)
	e.refused("exec", map[string]any{"cmd": "true", "timeout": 5}, `unknown field "timeout"`)
	e.refused("exec", map[string]any{}, "cmd is required")
	e.refused("sandbox_close", map[string]any{}, "session_id is required")
	e.refused("sandbox_create", map[string]any{"memory": "lots"}, "memory")
	e.refused("write_stdin", map[string]any{"process_id": 7}, "no sandbox yet")
}

func TestMCPExecOutputIsBoundedWithTheTruncationMarker(t *testing.T) {
	e := startMCP(t)
	out := e.ok("exec", map[string]any{"cmd": "seq 1 200000; echo tail-end"})
	if !strings.Contains(out, "…[truncated ") || !strings.Contains(out, "tail-end") || !strings.Contains(out, "\n1\n2\n") {
		t.Fatalf("long output is not head + marker + tail: %d bytes, %q...", len(out), out[:min(len(out), 300)])
	}
	if len(out) > 20<<10 {
		t.Fatalf("output of %d bytes passed the cap", len(out))
	}
}

func TestMCPLongCommandsReportProgress(t *testing.T) {
	e := startMCP(t)
	out, isErr := e.call("exec", map[string]any{"cmd": "sleep 2.5; echo done"}, sdk.Meta{"progressToken": "p1"})
	if isErr || !strings.Contains(out, "done") {
		t.Fatalf("exec = %q", out)
	}
	if n := e.progress.Load(); n < 2 {
		t.Fatalf("%d progress notifications for a 2.5s command, want one a second", n)
	}
}

func TestMCPTerminalProcessesTakeInput(t *testing.T) {
	e := startMCP(t)
	out := e.ok("exec", map[string]any{"cmd": "read line; echo got:$line", "tty": true})
	if !strings.Contains(out, "process_id: 1 ") {
		t.Fatalf("a terminal command waiting for input = %q, want a process_id", out)
	}
	out = e.ok("write_stdin", map[string]any{"process_id": 1, "chars": "hi\n", "wait_ms": 2000})
	if !strings.Contains(out, "got:hi") || !strings.Contains(out, "exit code: 0") {
		t.Fatalf("write_stdin = %q", out)
	}
}

func TestMCPSessionsEndWithTheClientAndAreTraced(t *testing.T) {
	e := startMCP(t)
	id := sessionID(t, e.ok("sandbox_create", nil))
	e.ok("exec", map[string]any{"session_id": id, "cmd": "sleep 600 >/dev/null 2>&1 & echo started"})
	other := sessionID(t, e.ok("sandbox_create", nil))
	e.ok("sandbox_close", map[string]any{"session_id": other})
	if out := e.ok("sandbox_list", nil); strings.Contains(out, other) || !strings.Contains(out, id) {
		t.Fatalf("sandbox_list after closing %s = %q", other, out)
	}
	if err := e.cs.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	// CommandTransport's Close waits for agentbox mcp to exit: nothing of
	// either session may be left in the backend's state.
	waitEmpty(t, e.stateDir)
	traces, err := filepath.Glob(filepath.Join(e.traces, "*-mcp-"+id+".jsonl"))
	if err != nil || len(traces) != 1 {
		t.Fatalf("trace of %s: %v %v", id, traces, err)
	}
	data, _ := os.ReadFile(traces[0])
	for _, want := range []string{`"type":"run_start"`, `"type":"tool_call","tool":"exec"`, `"type":"sandbox_exec"`, `"cmd":"sleep 600 \u003e/dev/null 2\u003e\u00261 \u0026 echo started"`, `"type":"run_end"`, "client disconnected"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("trace lacks %s:\n%s", want, data)
		}
	}
}

// A kept sandbox made from the model's manifest keeps the directory the
// manifest was written into until session rm, which removes both.
func TestMCPKeepLeavesSessionsForTheSessionCommands(t *testing.T) {
	e := startMCP(t, "--keep")
	id := sessionID(t, e.ok("sandbox_create", map[string]any{"manifest": map[string]any{
		"entries": map[string]any{"task.md": map[string]any{"file": map[string]any{"content": "from the manifest\n"}}},
	}}))
	e.ok("write_file", map[string]any{"path": "kept.txt", "content": "still here\n"})
	_ = e.cs.Close()
	manifestDirs := func() []string {
		dirs, err := filepath.Glob(filepath.Join(e.tmp, "agentbox-mcp-ws-*"))
		if err != nil {
			t.Fatal(err)
		}
		return dirs
	}
	if dirs := manifestDirs(); len(dirs) != 1 {
		t.Fatalf("after the client left, the manifest's directories are %v, want the kept session's", dirs)
	}
	cmd := exec.Command(e.bin, "exec", "--session", id, "--", "cat", "task.md", "kept.txt")
	cmd.Env = e.env()
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "from the manifest\nstill here") {
		t.Fatalf("exec --session %s after the client left: %v %s", id, err, out)
	}
	cmd = exec.Command(e.bin, "session", "rm", id)
	cmd.Env = e.env()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("session rm %s: %v %s", id, err, out)
	}
	waitEmpty(t, e.stateDir)
	if dirs := manifestDirs(); len(dirs) != 0 {
		t.Errorf("session rm left the manifest's directory: %v", dirs)
	}
}

// waitEmpty waits until the backend's state directory holds no session.
func waitEmpty(t *testing.T, dir string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var left []string
		_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() && p != dir {
				left = append(left, p)
			}
			return nil
		})
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("left behind in the state directory: %v", left)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// withBearer adds the bearer token to every request.
type withBearer struct{ token string }

func (b withBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func TestMCPOverHTTPNeedsTheTokenAndClosesAClientsSandboxesWhenItLeaves(t *testing.T) {
	requireLinuxSandbox(t)
	bin, home, stateDir := agentboxBinary(t), t.TempDir(), t.TempDir()
	const token = "test-token-0123456789abcdef"
	cmd := exec.Command(bin, "mcp", "--http", "127.0.0.1:0", "--trace-dir", "")
	cmd.Env = append(os.Environ(), "AGENTBOX_HOME="+home, "AGENTBOX_STATE_DIR="+stateDir, "AGENTBOX_MCP_TOKEN="+token)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := bufio.NewScanner(stderr)
	var endpoint string
	for endpoint == "" && lines.Scan() {
		t.Logf("agentbox mcp: %s", lines.Text())
		_, endpoint, _ = strings.Cut(lines.Text(), "serving MCP on ")
	}
	if endpoint == "" {
		t.Fatalf("agentbox mcp --http did not say where it listens")
	}
	go func() {
		for lines.Scan() {
			t.Logf("agentbox mcp: %s", lines.Text())
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := http.Post(endpoint, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a request without the token got %s, want 401", resp.Status)
	}

	client := sdk.NewClient(&sdk.Implementation{Name: "http-test", Version: "v0"}, nil)
	cs, err := client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: withBearer{token}}}, nil)
	if err != nil {
		t.Fatalf("connect with the token: %v", err)
	}
	e := &mcpEnv{t: t, cs: cs}
	out := e.ok("exec", map[string]any{"cmd": "echo over http; sleep 600 >/dev/null 2>&1 &"})
	if !strings.Contains(out, "over http") {
		t.Fatalf("exec = %q", out)
	}
	e.refused("read_file", map[string]any{"path": "/etc/hostname/../../proc/1/environ"}, "workspace")
	if err := cs.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	// The server still runs; the client's sandbox is gone.
	waitEmpty(t, stateDir)
	if cmd.ProcessState != nil {
		t.Fatal("the server exited with its client")
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("agentbox mcp --http after SIGTERM: %v", err)
	}
}

func TestMCPSnapshotsAndResourcesOfAClientsOwnSandboxes(t *testing.T) {
	e := startMCP(t)
	id := sessionID(t, e.ok("sandbox_create", nil))
	e.ok("write_file", map[string]any{"session_id": id, "path": "data/result.txt", "content": "42\n"})
	out := e.ok("snapshot_save", map[string]any{"session_id": id})
	snap, ok := strings.CutPrefix(strings.TrimSpace(out), "snapshot_id: ")
	if !ok {
		t.Fatalf("snapshot_save = %q", out)
	}
	restored := sessionID(t, e.ok("snapshot_restore", map[string]any{"snapshot_id": snap, "network": "none"}))
	if restored == id {
		t.Fatalf("snapshot_restore reused %s", id)
	}
	if out := e.ok("read_file", map[string]any{"session_id": restored, "path": "data/result.txt"}); out != "42\n" {
		t.Fatalf("the restored sandbox holds %q", out)
	}
	e.refused("snapshot_restore", map[string]any{"snapshot_id": strings.Repeat("0", 64)}, "not a snapshot you saved")

	ctx := context.Background()
	res, err := e.cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "agentbox://session/" + restored + "/data/result.txt"})
	if err != nil || len(res.Contents) != 1 || res.Contents[0].Text != "42\n" {
		t.Fatalf("workspace resource: %+v, %v", res, err)
	}
	res, err = e.cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "agentbox://trace/" + id})
	if err != nil || !strings.Contains(res.Contents[0].Text, `"tool":"snapshot_save"`) {
		t.Fatalf("trace resource: %+v, %v", res, err)
	}
	for _, uri := range []string{"agentbox://session/" + id + "/../../etc/passwd", "agentbox://session/someone-else/x", "agentbox://trace/someone-else"} {
		if _, err := e.cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: uri}); err == nil {
			t.Errorf("read %s: no error", uri)
		}
	}
}

func TestMCPPolicyFileSetsTheCeilingAndPresets(t *testing.T) {
	file := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(file, []byte("policy: {memory: 512M, timeout: 1m}\npresets: {default: {memory: 128M}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := startMCP(t, "--policy", file, "--timeout", "30s")
	out := e.ok("sandbox_create", nil)
	if !strings.Contains(out, "memory 128.0 MiB") || !strings.Contains(out, "30s per command") {
		t.Fatalf("sandbox_create under the file's default preset and --timeout 30s = %q", out)
	}
	e.refused("sandbox_create", map[string]any{"memory": "1G"}, "above the operator's ceiling")
}

func TestMCPPromoteLetsOutOnlyWhatTheOperatorsRulesPass(t *testing.T) {
	dir := t.TempDir()
	rules := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(rules, []byte("outputs:\n  - glob: out/report.md\n    required: true\n    max_size: 1MiB\n    types: [text/markdown]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	to := filepath.Join(dir, "promoted")
	e := startMCP(t, "--rules", rules, "--promote-to", to)
	id := sessionID(t, e.ok("sandbox_create", nil))
	e.refused("promote", map[string]any{"session_id": id}, "nothing promoted")
	e.ok("write_file", map[string]any{"session_id": id, "path": "out/report.md", "content": "# Report\n\nAll reconciled.\n"})
	out := e.ok("promote", map[string]any{"session_id": id})
	if !strings.Contains(out, "out/report.md") {
		t.Fatalf("promote = %q", out)
	}
	got, err := filepath.Glob(filepath.Join(to, id+"-*", "out", "report.md"))
	if err != nil || len(got) != 1 {
		t.Fatalf("promoted files under %s: %v %v", to, got, err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(filepath.Dir(got[0])), "agentbox-provenance.json")); err != nil {
		t.Fatalf("no provenance record beside the promoted file: %v", err)
	}
}
