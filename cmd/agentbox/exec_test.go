package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
)

// leakProbe watches what the `agentbox exec` runs of one test could leave
// behind: session state directories, their cgroups, id slots and mounts,
// and anything in tmp, the TMPDIR the command under test is given. The
// test's sessions live in a state directory of their own (the probe sets
// AGENTBOX_STATE_DIR), so what other tests running at the same time hold
// is not counted.
type leakProbe struct {
	tmp, state string
	ids        map[string]bool // sessions seen in the state directory
	before     []string
}

func newLeakProbe(t *testing.T, tmp string) *leakProbe {
	p := &leakProbe{tmp: tmp, state: filepath.Join(t.TempDir(), "state"), ids: map[string]bool{}}
	t.Setenv("AGENTBOX_STATE_DIR", p.state)
	p.before = p.list()
	return p
}

// list is what there is now; it remembers every session it sees, so that
// a later list finds the cgroups of one whose directory went.
func (p *leakProbe) list() []string {
	entries, _ := os.ReadDir(p.state)
	for _, e := range entries {
		p.ids[strings.TrimSuffix(e.Name(), ".workspace")] = true
	}
	var got []string
	for _, pattern := range []string{filepath.Join(p.state, "*"), filepath.Join(p.tmp, "*")} {
		m, _ := filepath.Glob(pattern)
		got = append(got, m...)
	}
	for id := range p.ids {
		for _, pattern := range []string{"/sys/fs/cgroup/*/agentbox/" + id, "/sys/fs/cgroup/agentbox/" + id} {
			m, _ := filepath.Glob(pattern)
			got = append(got, m...)
		}
	}
	slots, _ := filepath.Glob("/run/agentbox/ids/*")
	for _, s := range slots {
		if b, err := os.ReadFile(s); err == nil && strings.HasPrefix(string(b), p.state+"/") {
			got = append(got, "id slot "+s)
		}
	}
	if data, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, p.state) || strings.Contains(line, p.tmp) {
				got = append(got, "mount: "+line)
			}
		}
	}
	sort.Strings(got)
	return got
}

// added is what there is now and was not at the start.
func (p *leakProbe) added() []string { return diff(p.before, p.list()) }

// settled waits (up to ten seconds) until nothing was added, and returns
// what still is.
func (p *leakProbe) settled() []string {
	var left []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if left = p.added(); len(left) == 0 {
			break
		}
	}
	return left
}

func diff(before, after []string) []string {
	seen := map[string]bool{}
	for _, b := range before {
		seen[b] = true
	}
	var added []string
	for _, a := range after {
		if !seen[a] {
			added = append(added, a)
		}
	}
	return added
}

func TestExecBadInputFailsWithOneLineAndLeavesNothingBehind(t *testing.T) {
	bin := agentboxBinary(t)
	dir := t.TempDir()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"an unknown flag", []string{"exec", "--no-such-flag", "--", "true"}, "unknown flag"},
		{"a malformed size", []string{"exec", "--memory", "12 parsecs", "--", "true"}, "--memory"},
		{"a workspace that does not exist", []string{"exec", "--workspace", dir + "/missing", "--", "true"}, "--workspace"},
		{"a mount onto a path outside the sandbox layout", []string{"exec", "--ro", dir + ":/etc", "--", "true"}, "outside the sandbox layout"},
		{"network none together with an allow-list", []string{"exec", "--network", "none,example.com", "--", "true"}, "cannot be combined"},
		{"no command", []string{"exec"}, "no command"},
		{"an unknown backend", []string{"exec", "--backend", "vmware", "--", "true"}, "unknown backend"},
		{"a manifest that does not exist", []string{"exec", "--manifest", dir + "/m.yaml", "--", "true"}, "m.yaml"},
		{"a snapshot that does not exist", []string{"exec", "--store", dir + "/store", "--snapshot", "0123456789ab", "--", "true"}, "not found"},
		{"a URL where a host name belongs", []string{"exec", "--network", "http://pypi.org", "--", "true"}, "give the host name alone (pypi.org)"},
		{"a mount onto a mount root itself", []string{"exec", "--ro", dir + ":/data", "--", "true"}, "mount at a directory under it, such as /data/NAME"},
		{"a misspelt backend", []string{"exec", "--backend", "dokcer", "--", "true"}, `did you mean "docker"? (choose one of docker, kube, linux, local, remote)`},
		{"a terminal asked for with a pipe on stdin, which could never end", []string{"exec", "--tty", "--", "python3", "-q"}, "--tty needs a terminal on stdin"},
		{"an image for the native backend", []string{"exec", "--image", "python:3", "--", "true"}, "takes no image"},
		{"a credential for a host the allow-list does not admit", []string{"exec", "--network", "a.example.com", "--credential", "b.example.com=bearer:env:HOME", "--", "true"}, "the allow-list (a.example.com) does not admit it"},
		{"a credential whose variable is not set", []string{"exec", "--network", "a.example.com", "--credential", "a.example.com=bearer:env:AGENTBOX_NO_SUCH_VAR", "--", "true"}, "AGENTBOX_NO_SUCH_VAR is not set"},
		{"a credential for a remote session", []string{"exec", "--backend", "remote", "--server", "unix:/nonexistent", "--network", "a.example.com", "--credential", "a.example.com=bearer:env:HOME", "--", "true"}, "secrets stay with the process that runs the proxy"},
		{"a rule written as a URL", []string{"exec", "--network", "a.example.com", "--rule", "GET https://a.example.com/x", "--", "true"}, "--rule"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmp := t.TempDir()
			probe := newLeakProbe(t, tmp)
			cmd := exec.Command(bin, tt.args...)
			cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			ee, ok := err.(*exec.ExitError)
			if !ok || ee.ExitCode() != exitCode {
				t.Fatalf("exit = %v, want status %d; stderr:\n%s", err, exitCode, stderr.String())
			}
			msg := strings.TrimSpace(stderr.String())
			if strings.Count(msg, "\n") != 0 || !strings.HasPrefix(msg, "agentbox: ") || !strings.Contains(msg, tt.want) {
				t.Errorf("stderr = %q, want one line starting with \"agentbox: \" that mentions %q", msg, tt.want)
			}
			if added := probe.added(); len(added) > 0 {
				t.Errorf("left behind: %v", added)
			}
		})
	}
}

func TestExecSaysAProcessLimitWasTooLow(t *testing.T) {
	requireLinuxSandbox(t)
	var stderr bytes.Buffer
	cmd := exec.Command(agentboxBinary(t), "exec", "--pids", "1", "--", "true")
	cmd.Stderr = &stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitCode {
		t.Fatalf("exit = %v, want status %d; stderr:\n%s", err, exitCode, stderr.String())
	}
	for _, w := range []string{"limit of 1 processes and threads is reached", "too low", "raise --pids"} {
		if !strings.Contains(stderr.String(), w) {
			t.Errorf("stderr %q does not say %q", stderr.String(), w)
		}
	}
}

// requireLinuxSandbox skips unless the native backend can run here.
func requireLinuxSandbox(t *testing.T) {
	t.Helper()
	testenv.NeedRoot(t, "the native sandbox")
}

func TestExecJSONReportsTheCommandsResult(t *testing.T) {
	requireLinuxSandbox(t)
	bin := agentboxBinary(t)
	tmp := t.TempDir()
	probe := newLeakProbe(t, tmp)
	cmd := exec.Command(bin, "exec", "--json", "--", "sh", "-c", "echo out; echo err >&2; exit 3")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
		t.Fatalf("exit = %v, want 3", err)
	}
	var res execResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, out)
	}
	if res.ExitCode != 3 || res.Stdout != "out\n" || res.Stderr != "err\n" || res.TimedOut || res.Violations == nil {
		t.Errorf("result = %+v", res)
	}
	if added := probe.added(); len(added) > 0 {
		t.Errorf("left behind after a finished exec: %v", added)
	}
}

func TestExecJSONAgreesWithTheExitStatusAndNamesTheSnapshot(t *testing.T) {
	requireLinuxSandbox(t)
	bin := agentboxBinary(t)
	store := t.TempDir()
	cmd := exec.Command(bin, "exec", "--json", "--timeout", "500ms", "--store", store, "--save-snapshot", "--", "sh", "-c", "echo kept > note; sleep 30")
	out, err := cmd.Output()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 124 {
		t.Fatalf("exit = %v, want 124", err)
	}
	var res execResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, out)
	}
	if res.ExitCode != 124 || !res.TimedOut || res.Signal != "SIGKILL" {
		t.Errorf("exit_code %d, timed_out %v, signal %q; want 124 (what the shell sees), true, SIGKILL", res.ExitCode, res.TimedOut, res.Signal)
	}
	if len(res.Snapshot) < 12 {
		t.Fatalf("snapshot %q: --json lacks the id --save-snapshot made\n%s", res.Snapshot, out)
	}
	got, stderr, code := run(t, bin, "exec", "--store", store, "--snapshot", res.Snapshot, "--", "cat", "note")
	if code != 0 || got != "kept\n" {
		t.Errorf("the snapshot named in the JSON does not hold the workspace: status %d, %q %s", code, got, stderr)
	}
}

func TestExecExitStatusSaysTimeoutAndHostEnvIsNotInherited(t *testing.T) {
	requireLinuxSandbox(t)
	bin := agentboxBinary(t)
	cmd := exec.Command(bin, "exec", "--timeout", "300ms", "--", "sh", "-c", "sleep 30")
	if err := cmd.Run(); err == nil || err.(*exec.ExitError).ExitCode() != 124 {
		t.Errorf("timed-out exec: %v, want status %d", err, 124)
	}
	cmd = exec.Command(bin, "exec", "--env", "GIVEN=yes", "--", "env")
	cmd.Env = append(os.Environ(), "AGENTBOX_HOST_SECRET=hunter2")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "hunter2") || !strings.Contains(string(out), "GIVEN=yes") {
		t.Errorf("sandbox environment:\n%s", out)
	}
}

// startSleepingExec starts `agentbox exec` of a long sleep with TMPDIR
// tmp and returns once the command runs in its sandbox, with the exec's
// stderr.
func startSleepingExec(t *testing.T, bin, tmp string, flags ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	args := append(append([]string{"exec"}, flags...), "--", "sh", "-c", "echo up; exec sleep 60")
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "up\n" {
		t.Fatalf("waiting for the command to run: %q, %v (stderr %s)", line, err, stderr.String())
	}
	return cmd, &stderr
}

// An interrupt (Ctrl-C) while the command runs ends it, and the session
// goes with it: the signal is caught (not the default exit) from before
// the session exists.
func TestExecInterruptedEndsTheCommandAndLeavesNothingBehind(t *testing.T) {
	requireLinuxSandbox(t)
	bin := agentboxBinary(t)
	tmp := t.TempDir()
	probe := newLeakProbe(t, tmp)
	cmd, stderr := startSleepingExec(t, bin, tmp)
	if len(probe.added()) == 0 {
		t.Fatal("a running exec holds nothing the probe sees; the test cannot tell a leak")
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var err error
	select {
	case err = <-exited:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("agentbox exec did not end within 10s of SIGINT")
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 || !strings.Contains(stderr.String(), "interrupted") {
		t.Errorf("interrupted exec: %v, stderr %q; want status 130 saying it was interrupted", err, stderr.String())
	}
	if leaked := probe.added(); len(leaked) > 0 {
		t.Errorf("an interrupted exec left behind: %v", leaked)
	}
}

// An `agentbox exec` killed outright (SIGKILL: no chance to close its
// session) takes its session with it: its reaper notices and removes
// everything, with no gc run. That includes the temporary workspace a
// manifest is materialized into before the session exists.
func TestAKilledExecLeavesNothingBehind(t *testing.T) {
	requireLinuxSandbox(t)
	bin := agentboxBinary(t)
	m := filepath.Join(t.TempDir(), "m.yaml")
	if err := os.WriteFile(m, []byte("entries:\n  notes.txt:\n    file:\n      content: kept\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		flags []string
		holds string // a pattern in TMPDIR the running exec must hold
	}{
		{"a plain exec", nil, ""},
		{"an exec of a manifest without a workspace", []string{"--manifest", m}, "agentbox-ws-*/notes.txt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp := t.TempDir()
			probe := newLeakProbe(t, tmp)
			killed, _ := startSleepingExec(t, bin, tmp, tc.flags...)
			if len(probe.added()) == 0 {
				t.Fatal("a running exec holds nothing the probe sees; the test cannot tell a leak")
			}
			if held, _ := filepath.Glob(filepath.Join(tmp, tc.holds)); tc.holds != "" && len(held) != 1 {
				t.Fatalf("no %s in TMPDIR (%v); the test cannot tell a leak", tc.holds, probe.added())
			}
			if err := killed.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			_ = killed.Wait()
			if left := probe.settled(); len(left) > 0 {
				t.Errorf("a SIGKILLed exec left behind: %v", left)
			}
		})
	}
}

// The reproduction: a reader that stops reading kills agentbox
// with SIGPIPE mid-output; the command, which would sleep on, and its
// session go with it.
func TestAnExecKilledBySIGPIPELeavesNothingBehind(t *testing.T) {
	requireLinuxSandbox(t)
	bin := agentboxBinary(t)
	tmp := t.TempDir()
	probe := newLeakProbe(t, tmp)
	cmd := exec.Command(bin, "exec", "--timeout", "3s", "--", "sh", "-c", "head -c 20000000 /dev/zero; sleep 300")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := out.Read(make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	if len(probe.added()) == 0 {
		t.Fatal("a running exec holds nothing the probe sees; the test cannot tell a leak")
	}
	out.Close() // as head -c1 does
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("exec whose reader went away: %v, want it to fail", err)
	}
	if left := probe.settled(); len(left) > 0 {
		t.Errorf("an exec killed by SIGPIPE (%v) left behind: %v", err, left)
	}
}

// Should its reaper be killed too, a killed exec's session is an orphan
// that `agentbox gc` removes, and gc leaves alone the session of an exec
// that still runs.
func TestGCRemovesTheSessionOfAKilledExecOnly(t *testing.T) {
	requireLinuxSandbox(t)
	bin := agentboxBinary(t)
	tmp := t.TempDir()
	probe := newLeakProbe(t, tmp)
	killed, _ := startSleepingExec(t, bin, tmp)
	reaper := childNamed(t, killed.Process.Pid, "agentbox-linux-reaper")
	for _, pid := range []int{reaper, killed.Process.Pid} {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	_ = killed.Wait()
	time.Sleep(200 * time.Millisecond)
	if len(probe.added()) == 0 {
		t.Fatal("an exec killed with its reaper left nothing behind; the test needs its session to remain")
	}
	live, liveErr := startSleepingExec(t, bin, tmp)
	defer func() {
		_ = live.Process.Signal(syscall.SIGTERM) // ends the sleep through the exec, which closes its session
		_ = live.Wait()
		if leaked := probe.settled(); len(leaked) > 0 {
			t.Errorf("left behind after gc and the live exec's end: %v", leaked)
		}
	}()
	out, err := exec.Command(bin, "gc").CombinedOutput()
	if err != nil {
		t.Fatalf("gc: %v\n%s", err, out)
	}
	if n := strings.Count(string(out), "linux: removed session"); n != 1 {
		t.Errorf("gc removed %d linux sessions, want the killed exec's only:\n%s", n, out)
	}
	if err := live.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("gc ended the live exec: %v (stderr %s)", err, liveErr.String())
	}
	if r, err := exec.Command(bin, "gc", "--dry-run").CombinedOutput(); err != nil || !strings.Contains(string(r), "linux: no orphaned sessions") {
		t.Errorf("a second gc: %v\n%s", err, r)
	}
}

// childNamed is the pid of parent's child whose argv[0] is name.
func childNamed(t *testing.T, parent int, name string) int {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		procs, _ := filepath.Glob("/proc/[0-9]*/stat")
		for _, p := range procs {
			stat, err := os.ReadFile(p)
			if err != nil {
				continue
			}
			i := bytes.LastIndexByte(stat, ')')
			f := strings.Fields(string(stat[i+1:]))
			if len(f) < 2 || f[1] != strconv.Itoa(parent) {
				continue
			}
			cmdline, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "cmdline"))
			if argv0, _, _ := bytes.Cut(cmdline, []byte{0}); string(argv0) == name {
				pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
				return pid
			}
		}
	}
	t.Fatalf("process %d has no child %s", parent, name)
	return 0
}

func TestACacheOutlivesItsSessionButNotIntoSnapshots(t *testing.T) {
	requireLinuxSandbox(t)
	bin := agentboxBinary(t)
	home := t.TempDir()
	t.Setenv("AGENTBOX_HOME", home)
	if err := os.Chmod(home, 0o755); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(home, "store")
	_, stderr, code := run(t, bin, "exec", "--cache", "pip", "--store", store, "--save-snapshot", "--",
		"sh", "-c", `echo kept > "$PIP_CACHE_DIR/wheel" && echo mine > work.txt`)
	if code != 0 {
		t.Fatalf("first session: status %d: %s", code, stderr)
	}
	id := strings.TrimSpace(stderr[strings.LastIndex(stderr, "saved snapshot ")+len("saved snapshot "):])
	got, stderr, code := run(t, bin, "exec", "--cache", "pip", "--", "sh", "-c", `cat "$PIP_CACHE_DIR/wheel"`)
	if code != 0 || got != "kept\n" {
		t.Fatalf("a later session of the same user: status %d, %q %s; want the cache's file", code, got, stderr)
	}
	if b, err := os.ReadFile(filepath.Join(home, "caches", "pip", "wheel")); err != nil || string(b) != "kept\n" {
		t.Errorf("the cache is not kept under AGENTBOX_HOME/caches: %q %v", b, err)
	}
	got, stderr, code = run(t, bin, "exec", "--store", store, "--snapshot", id, "--", "sh", "-c", "cat work.txt; ls -A /mnt/cache 2>&1; find . -name wheel")
	if code != 0 || !strings.HasPrefix(got, "mine\n") || strings.Contains(got, "wheel") || strings.Contains(got, "pip") {
		t.Errorf("the snapshot of the first session: status %d, %q %s; want its workspace and no cache", code, got, stderr)
	}
}
