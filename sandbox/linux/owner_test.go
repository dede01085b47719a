package linux

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/linux/cgroups"
)

// ownerEnv, set to a state directory, makes this test binary an owner:
// TestOwnerProcess creates a session there (detached when
// ownerDetachedEnv is set), starts a long command in it, prints the
// session's id and waits to be killed.
const (
	ownerEnv         = "AGENTBOX_TEST_OWNER_STATE"
	ownerDetachedEnv = "AGENTBOX_TEST_OWNER_DETACHED"
)

func TestOwnerProcess(t *testing.T) {
	dir := os.Getenv(ownerEnv)
	if dir == "" {
		return // only a helper process started by startOwner runs it
	}
	c, err := New(Options{StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Create(context.Background(), sandbox.Spec{Detached: os.Getenv(ownerDetachedEnv) != ""})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Start(context.Background(), sandbox.ExecRequest{Cmd: []string{"sleep", "300"}}); err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString(s.ID() + "\n")
	select {}
}

// startOwner starts a process that owns a session in dir and returns it
// with the session's id once the session runs.
func startOwner(t *testing.T, dir string, detached bool) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestOwnerProcess$", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), ownerEnv+"="+dir)
	if detached {
		cmd.Env = append(cmd.Env, ownerDetachedEnv+"=1")
	}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the owner process printed no session id: %v", err)
	}
	return cmd, strings.TrimSpace(line)
}

// leftovers lists what session id of c still holds on the host: its
// directories, its cgroups, mounts under the state directory, its id slot
// and processes of its init.
func leftovers(c *Client, id string, initPID int) []string {
	var left []string
	for _, e := range sessionEntries(c.opts.StateDir) {
		left = append(left, filepath.Join(c.opts.StateDir, e.Name()))
	}
	g := c.cg.Open(id)
	for _, h := range []string{"v2", cgroups.Memory, cgroups.Pids, cgroups.CPU} {
		if d := g.Dir(h); d != "" {
			if _, err := os.Stat(d); err == nil {
				left = append(left, "cgroup "+d)
			}
		}
	}
	for _, line := range strings.Split(readFile("/proc/self/mountinfo"), "\n") {
		if strings.Contains(line, c.opts.StateDir) {
			left = append(left, "mount "+line)
		}
	}
	if slots, err := os.ReadDir(slotDir); err == nil {
		for _, e := range slots {
			if b, err := os.ReadFile(filepath.Join(slotDir, e.Name())); err == nil && string(b) == c.sessionDir(id) {
				left = append(left, "id slot "+e.Name())
			}
		}
	}
	if initAlive(initPID, id) {
		left = append(left, "init process")
	}
	return left
}

// A session belongs to the process that made it: killed outright (no
// chance to close anything), that process takes the session with it,
// command, init, cgroups, workspace tmpfs, state and id slot, with no
// garbage collection run.
func TestASessionEndsWithTheProcessThatOwnsIt(t *testing.T) {
	c := newTestClient(t)
	owner, id := startOwner(t, c.opts.StateDir, false)
	st, err := readState(c.sessionDir(id))
	if err != nil {
		t.Fatalf("the owner's session has no state: %v", err)
	}
	h := mustHandles(t, st)
	if !c.Alive(st) || !h.WorkspaceTmpfs {
		t.Fatalf("the owner's session is not up as expected (alive %v, tmpfs workspace %v)", c.Alive(st), h.WorkspaceTmpfs)
	}
	if err := owner.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = owner.Wait()
	start := time.Now()
	var left []string
	for time.Since(start) < 10*time.Second {
		if left = leftovers(c, id, h.InitPID); len(left) == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(left) > 0 {
		t.Fatalf("10s after its owner was killed, the session left: %v", left)
	}
	t.Logf("gone %v after its owner was killed", time.Since(start).Round(time.Millisecond))
}

// A detached session outlives its maker, until it is deleted.
func TestADetachedSessionOutlivesItsMaker(t *testing.T) {
	c := newTestClient(t)
	owner, id := startOwner(t, c.opts.StateDir, true)
	st, err := readState(c.sessionDir(id))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), st) })
	if err := owner.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = owner.Wait()
	time.Sleep(300 * time.Millisecond) // what a reaper would have taken by now
	if !c.Alive(st) {
		t.Fatal("a detached session ended with the process that made it")
	}
	if c.Orphaned(st) {
		t.Error("a detached session counts as orphaned")
	}
	s, err := c.Resume(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	if res := run(t, s, "echo", "still here"); string(res.Stdout) != "still here\n" {
		t.Errorf("the resumed detached session answered %q", res.Stdout)
	}
}

// Closed by its owner, a session is no business of the reaper's any
// more: the owner's end later deletes nothing, and the reaper is one for
// all of a process's sessions.
func TestAClosedSessionIsWithdrawnFromTheReaper(t *testing.T) {
	c := newTestClient(t)
	s := newTestSession(t, c, sandbox.Spec{})
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	life.mu.Lock()
	defer life.mu.Unlock()
	for k := range life.owned {
		if strings.HasSuffix(k, "\x00"+s.ID()) {
			t.Fatalf("closed session %s still registered with the reaper", s.ID())
		}
	}
}
