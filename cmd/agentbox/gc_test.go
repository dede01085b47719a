package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// A detached session whose state directory is removed while it runs (as
// a test's TempDir cleanup does after its server was killed) is out of
// sight of its state, and, its maker's record gone with it (the server's
// registry, here the CLI's), of everything that names it. gc --dry-run
// names its init, workspace mount and cgroups and removes nothing; gc
// ends them all. The session beside it, with its state, runs on.
func TestGCEndsADetachedSessionWhoseStateDirectoryIsGone(t *testing.T) {
	e := newSessionEnv(t)
	state := t.TempDir()
	t.Setenv("AGENTBOX_STATE_DIR", state)
	maker := newSessionEnv(t)
	gone := strings.TrimSpace(maker.ok("session", "create"))
	pid := initPidOf(t, maker, gone)
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) }) // should gc not end it
	kept := strings.TrimSpace(e.ok("session", "create"))
	t.Cleanup(func() { e.run("session", "rm", kept) })
	ws := filepath.Join(state, gone+".workspace")
	for _, dir := range []string{filepath.Join(state, gone), maker.home} {
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
	}
	groups := func(id string) []string {
		var dirs []string
		for _, pattern := range []string{"/sys/fs/cgroup/agentbox/" + id, "/sys/fs/cgroup/*/agentbox/" + id} {
			m, _ := filepath.Glob(pattern)
			dirs = append(dirs, m...)
		}
		return dirs
	}
	if !mountedAt(ws) || len(groups(gone)) == 0 {
		t.Fatalf("the session is not set up as the test needs (workspace mounted %v, cgroups %v)", mountedAt(ws), groups(gone))
	}

	// gc is host-wide here: another test's remains may fail to end; only
	// this test's session is judged.
	dry, stderr, _ := e.run("gc", "--dry-run")
	for _, want := range []string{
		"linux: would remove init pid " + strconv.Itoa(pid) + " of session " + gone + ": its session directory " + filepath.Join(state, gone) + " is gone",
		"linux: would remove workspace mount " + ws + " (tmpfs) of session " + gone + ":",
		"of session " + gone + ": its session's directory is gone",
	} {
		if !strings.Contains(dry, want) {
			t.Errorf("gc --dry-run does not say %q:\n%s%s", want, dry, stderr)
		}
	}
	if strings.Contains(dry, kept) {
		t.Errorf("gc --dry-run names the live session %s:\n%s", kept, dry)
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err != nil || !mountedAt(ws) || len(groups(gone)) == 0 {
		t.Fatalf("gc --dry-run removed something (init: %v, workspace mounted %v, cgroups %v)", err, mountedAt(ws), groups(gone))
	}

	out, stderr, _ := e.run("gc")
	if strings.Contains(stderr, gone) || strings.Contains(stderr, kept) {
		t.Errorf("gc failed on this test's sessions: %s", stderr)
	}
	waitGone(t, pid)
	if mountedAt(ws) {
		t.Errorf("gc left the workspace %s mounted:\n%s", ws, out)
	}
	if left := groups(gone); len(left) > 0 {
		t.Errorf("gc left the cgroups %v:\n%s", left, out)
	}
	if got := strings.TrimSpace(e.ok("exec", "--session", kept, "--", "echo", "here")); got != "here" {
		t.Errorf("the live session after gc answered %q", got)
	}
	if !mountedAt(filepath.Join(state, kept+".workspace")) || len(groups(kept)) == 0 {
		t.Errorf("gc took the live session's workspace mount or cgroups")
	}
}

// mountedAt reports whether dir is a mount point in this mount namespace.
func mountedAt(dir string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}
