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
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
)

// leakProbe lists what a failed or finished `exec` could leave behind:
// session cgroups, sandbox state directories, mounts, and anything in
// tmp, the TMPDIR the command under test was given. A test compares it
// before and after. (Cgroups and state directories are host-wide, so the
// test script runs packages one at a time: go test -p 1.)
func leakProbe(t *testing.T, tmp string) []string {
	t.Helper()
	var got []string
	for _, pattern := range []string{
		"/sys/fs/cgroup/*/agentbox/*",
		"/sys/fs/cgroup/agentbox/*",
		"/run/agentbox/linux/*",
		filepath.Join(os.Getenv("AGENTBOX_STATE_DIR"), "*"),
		filepath.Join(tmp, "*"),
	} {
		m, _ := filepath.Glob(pattern)
		for _, p := range m {
			if fi, err := os.Stat(p); err == nil && fi.IsDir() {
				got = append(got, p)
			}
		}
	}
	if data, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, "agentbox") {
				got = append(got, "mount: "+line)
			}
		}
	}
	sort.Strings(got)
	return got
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmp := t.TempDir()
			before := leakProbe(t, tmp)
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
			if added := diff(before, leakProbe(t, tmp)); len(added) > 0 {
				t.Errorf("left behind: %v", added)
			}
		})
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
	before := leakProbe(t, tmp)
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
	if added := diff(before, leakProbe(t, tmp)); len(added) > 0 {
		t.Errorf("left behind after a finished exec: %v", added)
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
func startSleepingExec(t *testing.T, bin, tmp string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(bin, "exec", "--", "sh", "-c", "echo up; exec sleep 60")
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
	before := leakProbe(t, tmp)
	cmd, stderr := startSleepingExec(t, bin, tmp)
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
	if leaked := diff(before, leakProbe(t, tmp)); len(leaked) > 0 {
		t.Errorf("an interrupted exec left behind: %v", leaked)
	}
}

// An `agentbox exec` killed outright (SIGKILL: no chance to close its
// session) leaves the session running; `agentbox gc` removes it, and
// leaves alone the session of an exec that still runs.
func TestGCRemovesTheSessionOfAKilledExecOnly(t *testing.T) {
	requireLinuxSandbox(t)
	bin := agentboxBinary(t)
	tmp := t.TempDir()
	// A state directory of its own: gc must find this test's sessions
	// only, not those of other tests running at the same time.
	t.Setenv("AGENTBOX_STATE_DIR", filepath.Join(t.TempDir(), "state"))
	before := leakProbe(t, tmp)
	killed, _ := startSleepingExec(t, bin, tmp)
	if err := killed.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = killed.Wait()
	if len(diff(before, leakProbe(t, tmp))) == 0 {
		t.Fatal("a SIGKILLed exec left nothing behind; the test needs its session to remain")
	}
	live, liveErr := startSleepingExec(t, bin, tmp)
	defer func() {
		_ = live.Process.Signal(syscall.SIGTERM) // ends the sleep through the exec, which closes its session
		_ = live.Wait()
		if leaked := diff(before, leakProbe(t, tmp)); len(leaked) > 0 {
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
