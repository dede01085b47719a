package linux

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/linux/cgroups"
)

func TestTimeoutKillsTheWholeTree(t *testing.T) {
	c := newTestClient(t)
	s := newTestSession(t, c, sandbox.Spec{})
	cases := []struct {
		name string
		cmd  string
	}{
		{"a background child dies with its shell", "sleep 100 & sleep 100"},
		{"a setsid'ed grandchild dies too", "setsid sh -c 'sleep 100 & sleep 100' & sleep 100"},
		{"a double-forked daemon with closed stdio dies too", "(setsid sh -c 'exec sleep 100' >/dev/null 2>&1 </dev/null &) ; sleep 100"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			res, err := sandbox.Exec(context.Background(), s, sandbox.ExecRequest{Cmd: []string{"sh", "-c", tc.cmd}, Timeout: 300 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if !res.TimedOut {
				t.Errorf("TimedOut = false, want true")
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("exec took %s after a 300ms timeout", d)
			}
			// Nothing of it may be left running.
			left := run(t, s, "sh", "-c", "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done")
			if strings.Contains(string(left.Stdout), "sleep") {
				t.Errorf("processes left after the timeout:\n%s", left.Stdout)
			}
		})
	}
}

func TestMemoryLimitOOMKills(t *testing.T) {
	c := newTestClient(t)
	if !hasPart(c, sandbox.PartMemory) {
		testenv.Skipf(t, "no memory controller on this host")
	}
	s := newTestSession(t, c, sandbox.Spec{Policy: sandbox.Policy{Resources: sandbox.Resources{MemoryBytes: 32 << 20}}})
	// A memory bomb: a shell variable doubling until the limit is hit.
	res, err := sandbox.Exec(context.Background(), s, sandbox.ExecRequest{
		Cmd:     []string{"sh", "-c", "x=xxxxxxxxxxxxxxxx; while true; do x=$x$x; done"},
		Timeout: 20 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.OOMKilled {
		t.Fatalf("OOMKilled = false (exit %d %s, timed out %v), want true", res.ExitCode, res.Signal, res.TimedOut)
	}
	if res.ExitCode != 137 {
		t.Errorf("exit code = %d, want 137", res.ExitCode)
	}
	// The session survives its command's OOM kill.
	if r := run(t, s, "true"); r.ExitCode != 0 {
		t.Errorf("exec after the OOM kill: exit %d", r.ExitCode)
	}
}

func TestPidsLimitBoundsAForkBomb(t *testing.T) {
	c := newTestClient(t)
	if !hasPart(c, sandbox.PartPids) {
		testenv.Skipf(t, "no pids controller on this host")
	}
	const limit = 32
	s := newTestSession(t, c, sandbox.Spec{Policy: sandbox.Policy{Resources: sandbox.Resources{Pids: limit}}})
	res, err := sandbox.Exec(context.Background(), s, sandbox.ExecRequest{
		Cmd:     []string{"sh", "-c", "while true; do sleep 5 & done"},
		Timeout: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == 0 {
		t.Errorf("the fork bomb exited 0")
	}
	g := s.(*session).g
	dir := g.Dir(cgroups.Pids)
	if dir == "" {
		dir = g.Dir("v2")
	}
	peak := readInt(t, filepath.Join(dir, "pids.peak"))
	if peak > limit {
		t.Errorf("pids.peak = %d, above the limit %d", peak, limit)
	}
	if peak < limit-2 {
		t.Errorf("pids.peak = %d: the bomb never reached the limit %d", peak, limit)
	}
	// The session still works once the bomb is gone.
	if r := run(t, s, "true"); r.ExitCode != 0 {
		t.Errorf("exec after the fork bomb: exit %d", r.ExitCode)
	}
}

func readInt(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		testenv.Skipf(t, "cannot read %s: %v", path, err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return n
}

func TestCPULimitThrottlesABusyLoop(t *testing.T) {
	c := newTestClient(t)
	if !hasPart(c, sandbox.PartCPU) {
		testenv.Skipf(t, "no cpu controller on this host")
	}
	s := newTestSession(t, c, sandbox.Spec{Policy: sandbox.Policy{Resources: sandbox.Resources{CPUs: 0.2}}})
	g := s.(*session).g
	if got := strings.Join(g.Enforced(), "; "); !strings.Contains(got, "cpu") {
		t.Errorf("enforced limits %q do not mention cpu", got)
	}
	dir := g.Dir(cgroups.CPU)
	if dir == "" {
		dir = g.Dir("v2")
	}
	// Spin until the shell has used 150 ms of CPU (15 ticks of utime and
	// stime in /proc/self/stat), however busy the host is. A fifth of a
	// core is 20 ms of CPU per 100 ms period, so the loop spans at least
	// seven periods and is stopped in nearly every one.
	before := cpuStat(t, dir)
	spin := `while :; do read -r l < /proc/$$/stat; set -- $l; [ $((${14}+${15})) -ge 15 ] && break; i=0; while [ $i -lt 2000 ]; do i=$((i+1)); done; done`
	res := run(t, s, "sh", "-c", spin)
	if res.ExitCode != 0 {
		t.Fatalf("exit %d: %s", res.ExitCode, res.Stderr)
	}
	after := cpuStat(t, dir)
	if n := after["nr_throttled"] - before["nr_throttled"]; n < 2 {
		t.Errorf("the loop was throttled in %d periods, want several (cpu.stat before %v, after %v)", n, before, after)
	}
}

// cpuStat reads a cgroup's cpu.stat (v1 and v2 both have nr_throttled).
func cpuStat(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		t.Fatalf("read cpu.stat: %v", err)
	}
	m := map[string]int64{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		k, v, _ := strings.Cut(line, " ")
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("cpu.stat line %q: %v", line, err)
		}
		m[k] = n
	}
	if _, ok := m["nr_throttled"]; !ok {
		t.Fatalf("cpu.stat has no nr_throttled: %s", b)
	}
	return m
}

func TestDiskQuotaStopsWritesPastTheSize(t *testing.T) {
	c := newTestClient(t)
	if !hasPart(c, sandbox.PartDisk) {
		testenv.Skipf(t, "no mkfs.ext4 or loop devices on this host")
	}
	s := newTestSession(t, c, sandbox.Spec{Policy: sandbox.Policy{Resources: sandbox.Resources{DiskBytes: 16 << 20}}})
	res := run(t, s, "sh", "-c", "dd if=/dev/zero of=big bs=1M count=64 2>&1; ls -l big")
	if res.ExitCode == 0 && !strings.Contains(string(res.Stdout), "No space") && !strings.Contains(string(res.Stdout), "File too large") {
		t.Fatalf("writing 64 MiB into a 16 MiB workspace succeeded: %s", res.Stdout)
	}
	ws := s.State().Workspace
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if mounted(ws) {
		t.Errorf("workspace %s still mounted after Close", ws)
	}
}

func TestDiskQuotaOnAnExistingWorkspaceIsRefused(t *testing.T) {
	c := newTestClient(t)
	_, err := c.Create(context.Background(), sandbox.Spec{Workspace: t.TempDir(), Policy: sandbox.Policy{Resources: sandbox.Resources{DiskBytes: 16 << 20}}})
	if err == nil || !strings.Contains(err.Error(), string(sandbox.PartDisk)) {
		t.Fatalf("err = %v, want a refusal naming %s", err, sandbox.PartDisk)
	}
}

func hasPart(c *Client, p sandbox.Part) bool {
	for _, e := range c.Enforces() {
		if e == p {
			return true
		}
	}
	return false
}

func TestSessionTimeoutEndsTheSession(t *testing.T) {
	c := newTestClient(t)
	s := newTestSession(t, c, sandbox.Spec{Policy: sandbox.Policy{Resources: sandbox.Resources{SessionTimeout: time.Second}}})
	start := time.Now()
	res, err := sandbox.Exec(context.Background(), s, sandbox.ExecRequest{Cmd: []string{"sleep", "30"}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut {
		t.Errorf("TimedOut = false after the session timeout (exit %d)", res.ExitCode)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the command ran %s past a 1s session timeout", d)
	}
	pid := s.(*session).h.InitPID
	for i := 0; i < 100 && initAlive(pid, ""); i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if initAlive(pid, "") {
		t.Errorf("init %d alive after the session timeout", pid)
	}
	if _, err := sandbox.Exec(context.Background(), s, sandbox.ExecRequest{Cmd: []string{"true"}}); !errors.Is(err, sandbox.ErrTimeout) {
		t.Errorf("exec after the session timeout: %v, want ErrTimeout", err)
	}
}

// TestASessionIsBoundedByDefault: with no --disk and no --cpus, a session
// still cannot fill the host's disk or inodes (its own workspace is a
// size-limited tmpfs) nor take every core from the host under contention
// (its CPU share is half a default group's).
func TestASessionIsBoundedByDefault(t *testing.T) {
	c := newTestClient(t)
	if c.rootless {
		t.Skip("rootless sessions cannot mount their workspace or write cgroups")
	}
	s := newTestSession(t, c, sandbox.Spec{})
	res := run(t, s, "stat", "-f", "-c", "%b %S %c", "/workspace")
	var blocks, bsize, inodes int64
	if _, err := fmt.Sscan(string(res.Stdout), &blocks, &bsize, &inodes); err != nil {
		t.Fatalf("stat -f /workspace: %q", res.Stdout)
	}
	if size := blocks * bsize; size <= 0 || size > defaultWorkspaceBytes {
		t.Errorf("the workspace holds %d bytes, want at most %d", size, defaultWorkspaceBytes)
	}
	if inodes <= 0 || inodes > defaultWorkspaceInodes {
		t.Errorf("the workspace holds %d inodes, want at most %d", inodes, defaultWorkspaceInodes)
	}
	if c.cg.Where(cgroups.CPU) == "" {
		testenv.Skipf(t, "no cpu controller here")
	}
	g := s.(*session).g
	want, file := "50", "cpu.weight"
	dir := g.Dir("v2")
	if c.cg.Where(cgroups.CPU) == "v1" {
		want, file, dir = "512", "cpu.shares", g.Dir(cgroups.CPU)
	}
	if b, err := os.ReadFile(filepath.Join(dir, file)); err != nil || strings.TrimSpace(string(b)) != want {
		t.Errorf("%s of the session = %q, %v; want %s", file, b, err, want)
	}
}

// TestTmpfsWritesCountInTheMemoryLimit: what a command writes to /tmp,
// /dev/shm or its own workspace (each a tmpfs) is memory the session's
// limit counts, so none of them is a way around it.
func TestTmpfsWritesCountInTheMemoryLimit(t *testing.T) {
	c := newTestClient(t)
	if !hasPart(c, sandbox.PartMemory) {
		testenv.Skipf(t, "no memory limits here")
	}
	s := newTestSession(t, c, sandbox.Spec{Policy: sandbox.Policy{Resources: sandbox.Resources{MemoryBytes: 48 << 20}}})
	for _, dir := range []string{"/tmp", "/dev/shm", "/workspace"} {
		res := run(t, s, "sh", "-c", "dd if=/dev/zero of="+dir+"/fill bs=1M count=96 2>&1; rm -f "+dir+"/fill")
		if res.ExitCode == 0 && !res.OOMKilled && strings.Contains(string(res.Stdout), "96+0 records out") {
			t.Errorf("96 MiB went to %s under a 48 MiB limit: %s", dir, res.Stdout)
		}
	}
}

// TestTheInitKillsACommandAtItsTimeout: the timeout holds inside the
// sandbox. A command started (not Exec'd: nothing on the client side
// counts its time) with a timeout is killed by the init when it passes,
// and Wait says so.
func TestTheInitKillsACommandAtItsTimeout(t *testing.T) {
	c := newTestClient(t)
	s := newTestSession(t, c, sandbox.Spec{})
	p, err := s.Start(context.Background(), sandbox.ExecRequest{Cmd: []string{"sh", "-c", "sleep 30 & sleep 30"}, Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	_ = p.Stdin().Close()
	go io.Copy(io.Discard, p.Stdout())
	go io.Copy(io.Discard, p.Stderr())
	start := time.Now()
	st, err := p.Wait(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !st.TimedOut || time.Since(start) > 10*time.Second {
		t.Fatalf("after %v: %+v; want timed out at 300ms", time.Since(start), st)
	}
	if len(st.Violations) == 0 || !strings.Contains(st.Violations[0], "exec timeout of 300ms") {
		t.Errorf("violations %q", st.Violations)
	}
}
