package linux

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/linux/cgroups"
	"golang.org/x/sys/unix"
)

func TestResumeFromAnotherClientReattachesToTheLiveInit(t *testing.T) {
	c1 := newTestClient(t)
	s1, err := c1.Create(context.Background(), sandbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close(context.Background())
	run(t, s1, "sh", "-c", "echo kept > /tmp/marker")
	st, err := sandbox.UnmarshalState(mustMarshal(t, s1.State()))
	if err != nil {
		t.Fatal(err)
	}
	c2, err := New(Options{StateDir: c1.opts.StateDir})
	if err != nil {
		t.Fatal(err)
	}
	s2, err := c2.Resume(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	if s2.ID() != s1.ID() {
		t.Errorf("resumed id %s, want the live session %s", s2.ID(), s1.ID())
	}
	// /tmp lives in the init's namespace: seeing it proves the reattach.
	res := run(t, s2, "cat", "/tmp/marker")
	if string(res.Stdout) != "kept\n" {
		t.Errorf("cat /tmp/marker = %q, want the live session's file", res.Stdout)
	}
	if err := s2.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := sandbox.Exec(context.Background(), s1, sandbox.ExecRequest{Cmd: []string{"true"}}); err == nil {
		t.Errorf("exec in a session closed by another client succeeded")
	}
}

func TestAStoppedSessionIsGoneAndRebuildsOnItsWorkspace(t *testing.T) {
	c := newTestClient(t)
	s, err := c.Create(context.Background(), sandbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WriteFile(context.Background(), "note.txt", []byte("survives\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	st := s.State()
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Resume(context.Background(), st); !errors.Is(err, sandbox.ErrGone) {
		t.Fatalf("resume of a stopped session: err = %v, want ErrGone", err)
	}
	s2, err := c.Rebuild(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close(context.Background())
	if s2.ID() == st.ID {
		t.Errorf("the rebuilt session kept the id %s", st.ID)
	}
	res := run(t, s2, "cat", "note.txt")
	if string(res.Stdout) != "survives\n" {
		t.Errorf("cat note.txt = %q after the rebuild", res.Stdout)
	}
	if err := s2.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(st.Workspace); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the adopted workspace %s was not removed on Close: %v", st.Workspace, err)
	}
}

func TestFailedCreateLeavesNothingBehind(t *testing.T) {
	c := newTestClient(t)
	cases := []struct {
		name string
		spec sandbox.Spec
	}{
		{"a missing workspace", sandbox.Spec{Workspace: "/nonexistent/agentbox-ws"}},
		{"an image, which the linux backend has no use for", sandbox.Spec{Image: "alpine:3"}},
		{"a mount outside the layout", sandbox.Spec{Mounts: []sandbox.Mount{{Source: "/usr", Target: "/etc/x"}}}},
		{"a missing mount source", sandbox.Spec{Mounts: []sandbox.Mount{{Source: "/nonexistent/src", Target: "/mnt/x"}}}},
		{"conflicting network policies", sandbox.Spec{Policy: sandbox.Policy{Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkNone, Allow: []string{"example.com"}}}}},
		{"host network without allow-weaker", sandbox.Spec{Policy: sandbox.Policy{Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkHost}}}},
		// These fail inside the init, after the cgroup, workspace and
		// init exist: all of it must go.
		{"a read-only path that does not exist", sandbox.Spec{Policy: sandbox.Policy{Filesystem: sandbox.FilesystemPolicy{ReadOnly: []string{"/workspace/missing"}}}}},
		{"a read-only path with memory limits", sandbox.Spec{Policy: sandbox.Policy{
			Resources:  sandbox.Resources{MemoryBytes: 64 << 20, Pids: 64, CPUs: 1},
			Filesystem: sandbox.FilesystemPolicy{ReadOnly: []string{"/workspace/missing"}}}}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := "failtest" + strconv.Itoa(i)
			c.newID = func() string { return id }
			_, err := c.Create(context.Background(), tc.spec)
			if err == nil {
				t.Fatal("create succeeded")
			}
			entries := sessionEntries(c.opts.StateDir)
			if len(entries) > 0 {
				t.Errorf("state directory not empty after a failed create: %v", names(entries))
			}
			g := c.cg.Open(id)
			for _, h := range []string{"v2", cgroups.Memory, cgroups.Pids, cgroups.CPU} {
				if d := g.Dir(h); d != "" {
					if _, err := os.Stat(d); err == nil {
						t.Errorf("cgroup %s left behind", d)
					}
				}
			}
			for _, line := range strings.Split(readFile("/proc/self/mountinfo"), "\n") {
				if strings.Contains(line, c.opts.StateDir) {
					t.Errorf("mount left behind: %s", line)
				}
			}
		})
	}
}

func TestCloseIsIdempotentAndRemovesEverything(t *testing.T) {
	c := newTestClient(t)
	s, err := c.Create(context.Background(), sandbox.Spec{Policy: sandbox.Policy{Resources: sandbox.Resources{MemoryBytes: 64 << 20, Pids: 64}}})
	if err != nil {
		t.Fatal(err)
	}
	st := s.State()
	pid := s.(*session).h.InitPID
	for i := 0; i < 2; i++ {
		if err := s.Close(context.Background()); err != nil {
			t.Fatalf("close #%d: %v", i+1, err)
		}
	}
	if initAlive(pid, "") {
		t.Errorf("init %d still alive after Close", pid)
	}
	for _, p := range []string{mustHandles(t, st).StateDir, st.Workspace} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still exists after Close", p)
		}
	}
	g := c.cg.Open(st.ID)
	for _, h := range []string{"v2", cgroups.Memory, cgroups.Pids, cgroups.CPU} {
		if d := g.Dir(h); d != "" {
			if _, err := os.Stat(d); err == nil {
				t.Errorf("cgroup %s still exists after Close", d)
			}
		}
	}
	if _, err := sandbox.Exec(context.Background(), s, sandbox.ExecRequest{Cmd: []string{"true"}}); !errors.Is(err, sandbox.ErrClosed) {
		t.Errorf("exec after Close: %v, want ErrClosed", err)
	}
	if err := c.Delete(context.Background(), st); err != nil {
		t.Errorf("delete of a closed session: %v", err)
	}
}

func names(es []os.DirEntry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

func readFile(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

func mustMarshal(t *testing.T, st sandbox.State) []byte {
	t.Helper()
	b, err := sandbox.MarshalState(st)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestListFindsLiveAndStoppedSessions(t *testing.T) {
	c := newTestClient(t)
	live := newTestSession(t, c, sandbox.Spec{})
	stopped := newTestSession(t, c, sandbox.Spec{})
	if err := stopped.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	sts, err := c.List()
	if err != nil {
		t.Fatal(err)
	}
	alive := map[string]bool{}
	for _, st := range sts {
		alive[st.ID] = c.Alive(st)
	}
	if v, ok := alive[live.ID()]; !ok || !v {
		t.Errorf("live session %s: listed %v, alive %v", live.ID(), ok, v)
	}
	if v, ok := alive[stopped.ID()]; !ok || v {
		t.Errorf("stopped session %s: listed %v, alive %v", stopped.ID(), ok, v)
	}
}

// A pid is taken for a session's init only when the init names that
// session: an init that reused a dead session's pid is not killed by its
// Delete.
func TestInitAliveTellsSessionsApart(t *testing.T) {
	c := newTestClient(t)
	s := newTestSession(t, c, sandbox.Spec{})
	pid := s.(*session).h.InitPID
	if !initAlive(pid, s.ID()) {
		t.Fatalf("init %d of session %s not recognised", pid, s.ID())
	}
	if initAlive(pid, "other"+s.ID()) {
		t.Errorf("init %d of session %s taken for another session's", pid, s.ID())
	}
}

// Delete with nothing but the session's id (what a tool that lost the
// state has) finds the init from state.json and ends it.
func TestDeleteByIDEndsTheInit(t *testing.T) {
	c := newTestClient(t)
	// No cgroups: their removal would kill the init whatever Delete
	// knew, as it does on a host without them only Delete's kill can.
	c.cg = &cgroups.Host{V1: map[string]string{}}
	s, err := c.Create(context.Background(), sandbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	pid := s.(*session).h.InitPID
	if err := c.Delete(context.Background(), sandbox.State{ID: s.ID()}); err != nil {
		t.Fatalf("delete by id: %v", err)
	}
	if initAlive(pid, s.ID()) {
		t.Errorf("init %d still alive after Delete by id", pid)
	}
	if _, err := os.Stat(c.sessionDir(s.ID())); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("session directory left after Delete by id: %v", err)
	}
}

// An init that dies before it has its log still explains itself: what
// it wrote until then is in Create's error, and nothing is left behind.
func TestAnInitThatDiesAtOnceIsReportedWithItsOutput(t *testing.T) {
	testenv.NeedRoot(t, "the linux backend")
	dir := t.TempDir()
	c, err := New(Options{StateDir: dir, InitBinary: "/bin/sh"}) // sh cannot open its "script", id=...
	if err != nil {
		testenv.Skipf(t, "linux backend unavailable: %v", err)
	}
	_, err = c.Create(context.Background(), sandbox.Spec{})
	if err == nil {
		t.Fatal("create with an init that is not one succeeded")
	}
	if !strings.Contains(err.Error(), "init output:") || !strings.Contains(err.Error(), "id=") {
		t.Errorf("create error lacks what the init wrote: %v", err)
	}
	if entries := sessionEntries(dir); len(entries) > 0 {
		t.Errorf("state directory not empty after the failed create: %v", names(entries))
	}
}

// The init survives every signal but SIGKILL and SIGSTOP sent from the
// host (no landlock signal scope in the way): with kill, and queued with
// a code of the sender's choosing to each of its threads (Go takes a
// queued SIGSEGV for a real fault), each followed by a command. Go's
// runtime would exit on SIGTERM, dump on SIGQUIT and crash on such a
// SIGSEGV; the init leaves them all to the kernel, which spares a pid
// namespace's init the signals it has no handler for.
func TestTheInitSurvivesEverySignalButSIGKILL(t *testing.T) {
	c := newTestClient(t)
	s, err := c.Create(context.Background(), sandbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	pid, err := InitPID(s.State())
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		t.Fatal(err)
	}
	for sig := 1; sig <= 64; sig++ {
		if sig == int(unix.SIGKILL) || sig == int(unix.SIGSTOP) || (sig > 31 && sig < 34) {
			continue // 32 and 33 are the C library's own
		}
		if err := unix.Kill(pid, unix.Signal(sig)); err != nil {
			t.Fatalf("send signal %d to the init: %v", sig, err)
		}
		for _, task := range tasks {
			tid, _ := strconv.Atoi(task.Name())
			var info [128]byte // siginfo_t: si_signo, si_errno, si_code
			*(*int32)(unsafe.Pointer(&info[0])) = int32(sig)
			*(*int32)(unsafe.Pointer(&info[8])) = -1 // SI_QUEUE
			_, _, errno := unix.Syscall6(unix.SYS_RT_TGSIGQUEUEINFO, uintptr(pid), uintptr(tid), uintptr(sig), uintptr(unsafe.Pointer(&info[0])), 0, 0)
			if errno != 0 && errno != unix.ESRCH { // a thread may have ended
				t.Fatalf("queue signal %d to the init's thread %d: %v", sig, tid, errno)
			}
		}
		if res, err := sandbox.Exec(context.Background(), s, sandbox.ExecRequest{Cmd: []string{"true"}}); err != nil || res.ExitCode != 0 {
			t.Fatalf("after signal %d (%v) the session does not run a command: %v, %+v", sig, unix.SignalName(unix.Signal(sig)), err, res.ExitStatus)
		}
	}
	// What the init does to its own dispositions is not inherited: a
	// command starts with no signal ignored.
	res := run(t, s, "cat", "/proc/self/status")
	if !strings.Contains(string(res.Stdout), "\nSigIgn:\t0000000000000000\n") {
		t.Errorf("a command starts with signals ignored:\n%s", res.Stdout)
	}
}

// sessionEntries lists what a state directory holds of sessions.
func sessionEntries(dir string) []os.DirEntry {
	entries, _ := os.ReadDir(dir)
	return entries
}
