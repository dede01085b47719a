package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// sessionEnv runs agentbox with its data (the session registry) in a
// directory of the test's own.
type sessionEnv struct {
	t    *testing.T
	bin  string
	home string
}

func newSessionEnv(t *testing.T) *sessionEnv {
	t.Helper()
	requireLinuxSandbox(t)
	return &sessionEnv{t: t, bin: agentboxBinary(t), home: t.TempDir()}
}

// run runs agentbox with args and returns stdout, stderr and the status.
func (e *sessionEnv) run(args ...string) (string, string, int) {
	e.t.Helper()
	cmd := exec.Command(e.bin, args...)
	cmd.Env = append(os.Environ(), "AGENTBOX_HOME="+e.home)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		e.t.Fatalf("run agentbox %q: %v", args, err)
	}
	return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
}

// start starts agentbox with args in the background (a command that runs
// until interrupted) and returns its stdout and what it wrote to stderr.
func (e *sessionEnv) start(args ...string) (*exec.Cmd, io.ReadCloser, *strings.Builder) {
	e.t.Helper()
	cmd := exec.Command(e.bin, args...)
	cmd.Env = append(os.Environ(), "AGENTBOX_HOME="+e.home)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	stderr := &strings.Builder{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	return cmd, stdout, stderr
}

// ok runs agentbox with args and fails the test unless it exits 0.
func (e *sessionEnv) ok(args ...string) string {
	e.t.Helper()
	stdout, stderr, code := e.run(args...)
	if code != 0 {
		e.t.Fatalf("agentbox %q: exit %d, stderr %q", args, code, stderr)
	}
	return stdout
}

func TestASessionKeepsItsFilesAndProcessesBetweenCommands(t *testing.T) {
	e := newSessionEnv(t)
	ws := t.TempDir()
	if err := os.Chmod(ws, 0o777); err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(e.ok("session", "create", "--workspace", ws, "--memory", "256M", "--timeout", "5s"))
	t.Cleanup(func() { e.run("session", "rm", id) })
	if id == "" || strings.ContainsAny(id, " \n") {
		t.Fatalf("session create printed %q, want one id", id)
	}
	e.ok("exec", "--session", id, "--", "sh", "-c", "echo kept > note.txt; echo tmp > /tmp/t; sleep 300 >/dev/null 2>&1 &")
	if out := e.ok("exec", "--session", id, "--", "sh", "-c", "cat note.txt /tmp/t; pgrep -c sleep"); out != "kept\ntmp\n1\n" {
		t.Fatalf("the second command saw %q; want the first one's files and its background process", out)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "note.txt")); err != nil || string(b) != "kept\n" {
		t.Fatalf("the workspace on the host holds %q, %v", b, err)
	}
	// The session's policy is a ceiling: a command cannot ask for more
	// time than it was created with.
	start := time.Now()
	_, _, code := e.run("exec", "--session", id, "--timeout", "1h", "--", "sleep", "30")
	if code != 124 || time.Since(start) > 20*time.Second {
		t.Fatalf("a command asking for 1h in a session of 5s: exit %d after %v; want 124 within the session's 5s", code, time.Since(start))
	}

	var rows []struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal([]byte(e.ok("session", "ls", "--json")), &rows); err != nil || len(rows) != 1 || rows[0].ID != id || rows[0].Status != "running" {
		t.Fatalf("session ls --json = %+v, %v; want the one running session", rows, err)
	}
	var st struct {
		ID      string `json:"id"`
		Backend string `json:"backend"`
	}
	if err := json.Unmarshal([]byte(e.ok("session", "state", id)), &st); err != nil || st.ID != id || st.Backend != "linux" {
		t.Fatalf("session state = %+v, %v", st, err)
	}
	if out := e.ok("session", "rm", id); strings.TrimSpace(out) != id {
		t.Fatalf("session rm printed %q", out)
	}
	_, stderr, code := e.run("exec", "--session", id, "--", "true")
	if code != exitCode || !strings.Contains(stderr, "no session "+id) {
		t.Fatalf("exec in a removed session: exit %d, stderr %q; want 125 saying there is no such session", code, stderr)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "note.txt")); err != nil || string(b) != "kept\n" {
		t.Fatalf("session rm touched the caller's workspace: %q, %v", b, err)
	}
}

func TestExecInASessionRefusesWhatCannotApply(t *testing.T) {
	e := newSessionEnv(t)
	id := strings.TrimSpace(e.ok("session", "create"))
	t.Cleanup(func() { e.run("session", "rm", id) })
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"flags that shape a new sandbox", []string{"exec", "--session", id, "--memory", "2G", "--", "true"}, "--memory shape a new sandbox"},
		{"an id that is no session", []string{"exec", "--session", "nope", "--", "true"}, "no session nope"},
		{"an id that is a path", []string{"exec", "--session", "../x", "--", "true"}, "is not a session id"},
		{"a terminal without one on stdin", []string{"exec", "--session", id, "--tty", "--", "true"}, "--tty needs a terminal on stdin"},
		{"an allow-list for a detached session", []string{"session", "create", "--network", "example.com"}, "a detached session has no egress proxy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, code := e.run(tt.args...)
			if code != exitCode || !strings.Contains(stderr, tt.want) || strings.Count(stderr, "\n") != 1 {
				t.Fatalf("exit %d, stderr %q; want 125 and one line with %q", code, stderr, tt.want)
			}
		})
	}
}

func TestGCRemovesADetachedSessionOnlyOnceItIsGone(t *testing.T) {
	e := newSessionEnv(t)
	id := strings.TrimSpace(e.ok("session", "create"))
	t.Cleanup(func() { e.run("session", "rm", id) })
	e.ok("gc")
	if out := e.ok("session", "ls"); !strings.Contains(out, id) || !strings.Contains(out, "running") {
		t.Fatalf("gc removed a live detached session: ls says %q", out)
	}
	// The sandbox dies from outside (a crash, an OOM of the host).
	pid := initPidOf(t, e, id)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid)
	if out := e.ok("session", "ls"); !strings.Contains(out, "gone") {
		t.Fatalf("ls after the sandbox died: %q; want it shown gone", out)
	}
	_, stderr, code := e.run("exec", "--session", id, "--", "true")
	if code != exitCode || !strings.Contains(stderr, "is gone") {
		t.Fatalf("exec in a dead session: exit %d, stderr %q; want 125 saying it is gone", code, stderr)
	}
	if out := e.ok("gc"); !strings.Contains(out, id) {
		t.Fatalf("gc output %q does not name the dead session %s", out, id)
	}
	if out := e.ok("session", "ls"); strings.Contains(out, id) {
		t.Fatalf("gc left the dead session listed: %q", out)
	}
}

// initPidOf is the host pid of the init of session id, from its state.
func initPidOf(t *testing.T, e *sessionEnv, id string) int {
	t.Helper()
	var st struct {
		Handles struct {
			InitPID int `json:"init_pid"`
		} `json:"handles"`
	}
	if err := json.Unmarshal([]byte(e.ok("session", "state", id)), &st); err != nil || st.Handles.InitPID <= 0 {
		t.Fatalf("session state: %+v, %v", st, err)
	}
	return st.Handles.InitPID
}

// waitGone waits for pid to be reaped or a zombie.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	for range 200 {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil || strings.Contains(string(b), ") Z ") {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("pid %d did not die", pid)
}

func TestAPausedSessionRefusesCommandsAndContinuesAfterUnpause(t *testing.T) {
	e := newSessionEnv(t)
	id := strings.TrimSpace(e.ok("session", "create"))
	t.Cleanup(func() { e.run("session", "rm", id) })
	e.ok("exec", "--session", id, "--", "sh", "-c", "i=0; (while :; do i=$((i+1)); echo $i > n.tmp; mv n.tmp n; done) >/dev/null 2>&1 &")
	e.ok("session", "pause", id)
	status := func() string {
		var rows []struct {
			Status string `json:"status"`
		}
		if err := json.Unmarshal([]byte(e.ok("session", "ls", "--json")), &rows); err != nil || len(rows) != 1 {
			t.Fatalf("session ls --json: %v, %d rows", err, len(rows))
		}
		return rows[0].Status
	}
	if got := status(); got != "paused" {
		t.Fatalf("session ls says %q of a paused session", got)
	}
	_, stderr, code := e.run("exec", "--session", id, "--", "true")
	if code != exitCode || !strings.Contains(stderr, "is paused; unpause it first") {
		t.Fatalf("exec in a paused session: exit %d, stderr %q; want 125 saying it is paused", code, stderr)
	}
	e.ok("session", "unpause", id)
	if got := status(); got != "running" {
		t.Fatalf("session ls says %q after unpause", got)
	}
	// The loop started before the pause still runs, where it stood.
	first := e.ok("exec", "--session", id, "--", "cat", "n")
	time.Sleep(200 * time.Millisecond)
	if second := e.ok("exec", "--session", id, "--", "cat", "n"); atoi(t, second) <= atoi(t, first) {
		t.Fatalf("the counter went from %s to %s after unpause", first, second)
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		t.Fatalf("not a number: %q", s)
	}
	return n
}

// A detached session keeps the temporary workspace its manifest was
// materialized into after the command that made it exits (whose reaper
// would otherwise remove it), until session rm.
func TestASessionMadeFromAManifestKeepsItsWorkspaceUntilRemoved(t *testing.T) {
	e := newSessionEnv(t)
	tmp := t.TempDir()
	m := filepath.Join(t.TempDir(), "m.yaml")
	if err := os.WriteFile(m, []byte("entries:\n  notes.txt:\n    file:\n      content: kept\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", tmp)
	id := strings.TrimSpace(e.ok("session", "create", "--manifest", m, "--timeout", "30s"))
	t.Cleanup(func() { e.run("session", "rm", id) })
	time.Sleep(300 * time.Millisecond) // time for a reaper to act, were the workspace registered
	if got := e.ok("exec", "--session", id, "--", "cat", "notes.txt"); got != "kept" {
		t.Errorf("the session's manifest file reads %q, want %q", got, "kept")
	}
	e.ok("session", "rm", id)
	if left, _ := filepath.Glob(filepath.Join(tmp, "agentbox-ws-*")); len(left) > 0 {
		t.Errorf("session rm left the temporary workspace: %v", left)
	}
}

func TestSessionWatchPrintsTheSandboxsChangesAsJSONLines(t *testing.T) {
	e := newSessionEnv(t)
	id := strings.TrimSpace(e.ok("session", "create"))
	t.Cleanup(func() { e.run("session", "rm", id) })
	e.ok("exec", "--session", id, "--", "mkdir", "out")
	cmd, stdout, stderr := e.start("session", "watch", id, "out")
	lines := make(chan map[string]any)
	go func() {
		dec := json.NewDecoder(stdout)
		for {
			var ev map[string]any
			if dec.Decode(&ev) != nil {
				close(lines)
				return
			}
			lines <- ev
		}
	}()
	// The watch is set up once the command runs; write until it says so.
	want := map[string]bool{"create out/report.txt": false, "rename out/final.txt": false}
	deadline := time.After(20 * time.Second)
	write := true
	for {
		if write {
			e.ok("exec", "--session", id, "--", "sh", "-c", "echo done > out/report.txt && mv out/report.txt out/final.txt && rm out/final.txt")
			write = false
		}
		select {
		case ev, ok := <-lines:
			if !ok {
				t.Fatalf("session watch ended: %s", stderr.String())
			}
			if k := fmt.Sprint(ev["op"], " ", ev["path"]); ev["path"] != nil {
				if _, ok := want[k]; ok {
					want[k] = true
				}
			}
		case <-time.After(time.Second):
			write = true
		case <-deadline:
			t.Fatalf("session watch printed no %v in 20 s; stderr %s", want, stderr.String())
		}
		if want["create out/report.txt"] && want["rename out/final.txt"] {
			break
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		for range lines {
		}
		done <- cmd.Wait()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("session watch did not end on SIGINT")
	}
}

func TestASessionWithAnIdleTimeoutEndsIdleAndExtendPutsItOff(t *testing.T) {
	e := newSessionEnv(t)
	id := strings.TrimSpace(e.ok("session", "create", "--idle-timeout", "2s"))
	t.Cleanup(func() { e.run("session", "rm", id) })
	status := func() string {
		var rows []struct {
			Status string `json:"status"`
		}
		if err := json.Unmarshal([]byte(e.ok("session", "ls", "--json")), &rows); err != nil || len(rows) != 1 {
			t.Fatalf("session ls --json: %v, %d rows", err, len(rows))
		}
		return rows[0].Status
	}
	for range 4 {
		time.Sleep(time.Second)
		e.ok("session", "extend", id)
	}
	if got := status(); got != "running" {
		t.Fatalf("session ls says %q of a session extended every second", got)
	}
	deadline := time.Now().Add(15 * time.Second)
	for status() != "gone" {
		if time.Now().After(deadline) {
			t.Fatal("an idle session with an idle timeout of 2s still ran 15 s later")
		}
		time.Sleep(500 * time.Millisecond)
	}
	if _, stderr, code := e.run("session", "extend", id); code == 0 || !strings.Contains(stderr, "gone") {
		t.Fatalf("extend of an ended session: exit %d, stderr %q", code, stderr)
	}
}

// extend of a session without an idle timeout succeeds but says it
// changes nothing, so no one believes it lengthened the session's life.
func TestExtendSaysWhenASessionHasNoIdleTimeout(t *testing.T) {
	e := newSessionEnv(t)
	id := strings.TrimSpace(e.ok("session", "create", "--timeout", "60s"))
	t.Cleanup(func() { e.run("session", "rm", id) })
	stdout, stderr, code := e.run("session", "extend", id)
	if code != 0 || strings.TrimSpace(stdout) != id {
		t.Fatalf("extend: exit %d, stdout %q, stderr %q; want 0 and the id", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "has no idle timeout") {
		t.Fatalf("extend of a session without an idle timeout said %q; want it to say it changes nothing", stderr)
	}
	idle := strings.TrimSpace(e.ok("session", "create", "--idle-timeout", "1m"))
	t.Cleanup(func() { e.run("session", "rm", idle) })
	if _, stderr, _ := e.run("session", "extend", idle); strings.Contains(stderr, "no idle timeout") {
		t.Fatalf("extend of a session with an idle timeout warned: %q", stderr)
	}
}

func TestSessionForkCopiesTheWorkspaceAndHibernateSaysWhyNot(t *testing.T) {
	e := newSessionEnv(t)
	store := t.TempDir()
	id := strings.TrimSpace(e.ok("session", "create"))
	t.Cleanup(func() { e.run("session", "rm", id) })
	e.ok("exec", "--session", id, "--", "sh", "-c", "echo kept > note.txt; echo in-memory > /tmp/t")
	e.ok("session", "pause", id)
	fork := strings.TrimSpace(e.ok("session", "fork", "--store", store, id))
	t.Cleanup(func() { e.run("session", "rm", fork) })
	if fork == "" || fork == id {
		t.Fatalf("session fork printed %q", fork)
	}
	if out := e.ok("exec", "--session", fork, "--", "sh", "-c", "cat note.txt; cat /tmp/t 2>/dev/null || echo no-tmp"); out != "kept\nno-tmp\n" {
		t.Fatalf("the fork saw %q; want the workspace's file and not the source's /tmp", out)
	}
	if _, stderr, code := e.run("exec", "--session", id, "--", "true"); code != exitCode || !strings.Contains(stderr, "paused") {
		t.Fatalf("the source after a fork: exit %d, %q; want it still paused", code, stderr)
	}
	_, stderr, code := e.run("session", "hibernate", fork)
	if code != exitCode || !strings.Contains(strings.ToLower(stderr), "criu") || !strings.Contains(stderr, "session fork") {
		t.Fatalf("session hibernate: exit %d, stderr %q; want a refusal naming why and the fork", code, stderr)
	}
}

// session forward serves a session's exposed port on the host: a client
// on the host reaches a server in the sandbox, and the sandbox's other
// ports stay unreachable.
func TestSessionForwardServesAnExposedPortOnTheHost(t *testing.T) {
	e := newSessionEnv(t)
	id := strings.TrimSpace(e.ok("session", "create", "--port", "18765"))
	t.Cleanup(func() { e.run("session", "rm", id) })
	e.ok("exec", "--session", id, "--", "sh", "-c", "echo served > page.txt; python3 -m http.server 18765 --bind 127.0.0.1 >/dev/null 2>&1 &")

	_, stderr, code := e.run("session", "forward", id, "18766")
	if code != exitCode || !strings.Contains(stderr, "port 18766 is not exposed") || !strings.Contains(stderr, "session create --port 18766") {
		t.Fatalf("forward of a port not exposed: exit %d, stderr %q", code, stderr)
	}

	cmd, out, fwdErr := e.start("session", "forward", id, "18765", "--listen", "127.0.0.1:0")
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		t.Fatalf("read the listening address: %v (stderr %q)", err, fwdErr.String())
	}
	addr := strings.TrimSpace(line)
	var body []byte
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/page.txt")
		if err == nil {
			body, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil && resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("GET through %s: %v (forward said %q)", addr, err, fwdErr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if string(body) != "served\n" {
		t.Errorf("body through the forward = %q, want %q", body, "served\n")
	}
	// The sandbox's port itself is not on the host's loopback.
	if c, err := net.DialTimeout("tcp", "127.0.0.1:18765", time.Second); err == nil {
		c.Close()
		t.Errorf("127.0.0.1:18765 answers on the host without a forward")
	}
	// Ctrl-C ends the forward cleanly.
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("forward did not end on SIGINT")
	}

	// A session removed under a forward ends it, saying why, at the next
	// connection.
	cmd, out, fwdErr = e.start("session", "forward", id, "18765", "--listen", "127.0.0.1:0")
	line, err = bufio.NewReader(out).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		t.Fatalf("read the listening address: %v (stderr %q)", err, fwdErr.String())
	}
	e.ok("session", "rm", id)
	if c, err := net.Dial("tcp", strings.TrimSpace(line)); err == nil {
		c.Close()
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitCode || !strings.Contains(fwdErr.String(), "not running") || strings.Contains(fwdErr.String(), "accept:") {
			t.Fatalf("forward of a removed session ended with %v, stderr %q; want exit %d saying it is not running", err, fwdErr.String(), exitCode)
		}
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("forward went on after its session was removed (stderr %q)", fwdErr.String())
	}
}
