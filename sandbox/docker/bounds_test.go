package docker

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
)

// The reliability holes of issue 16 that a command can reach from inside
// a docker session: each test tries one.

// asBoth runs f in a session of the default user and in one running as
// root (a root-owned workspace), the two kinds the attacks were tried as.
func asBoth(t *testing.T, c *Client, spec sandbox.Spec, f func(t *testing.T, sess sandbox.Session)) {
	t.Helper()
	for _, user := range []string{"", "0:0"} {
		name := "as the default user"
		if user != "" {
			name = "as root"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sp := spec
			sp.User = user
			f(t, newSession(t, c, sp))
		})
	}
}

// TestTheKernelsLayoutAndTheHostsIdentityAreMasked: what a sandbox has no
// need to read, and a heap exploit or a fingerprint would, shows nothing
// (as in the native backend), to the session user and to root inside.
func TestTheKernelsLayoutAndTheHostsIdentityAreMasked(t *testing.T) {
	c := testClient(t)
	t.Parallel()
	files := []string{"/proc/config.gz", "/proc/key-users", "/proc/kpageflags", "/proc/kpagecount", "/proc/slabinfo",
		"/proc/vmallocinfo", "/proc/iomem", "/proc/kallsyms", "/proc/keys", "/proc/sys/kernel/random/boot_id"}
	asBoth(t, c, sandbox.Spec{}, func(t *testing.T, sess sandbox.Session) {
		for _, f := range files {
			res := run(t, sess, "head -c 64 "+f+" 2>/dev/null | od -An -c | head -2")
			if got := strings.TrimSpace(string(res.Stdout)); got != "" {
				t.Errorf("%s reads %q", f, got)
			}
		}
	})
}

// TestASignalToTheInitDoesNotEndTheSession: a command that signals pid 1
// with every signal there is (kill -TERM 1 first among them) leaves the
// session running, and its own result names no cause it did not have.
func TestASignalToTheInitDoesNotEndTheSession(t *testing.T) {
	c := testClient(t)
	t.Parallel()
	spec := sandbox.Spec{Policy: sandbox.Policy{Resources: sandbox.Resources{MemoryBytes: 256 << 20}}}
	asBoth(t, c, spec, func(t *testing.T, sess sandbox.Session) {
		res := run(t, sess, `kill -TERM 1; sleep 0.3; i=1; while [ $i -le 64 ]; do kill -s $i 1 2>/dev/null; i=$((i+1)); done; sleep 0.3; echo alive`)
		if string(res.Stdout) != "alive\n" || res.ExitCode != 0 || len(res.Violations) > 0 {
			t.Fatalf("the signalling command: %+v, stdout %q, stderr %q", res.ExitStatus, res.Stdout, res.Stderr)
		}
		if again := run(t, sess, "echo still"); string(again.Stdout) != "still\n" {
			t.Fatalf("after the signals: %+v, %q", again.ExitStatus, again.Stdout)
		}
	})
}

// TestAContainerKilledOutsideIsNotReportedAsOOM: a command ended because
// its container was killed behind agentbox's back died by SIGKILL; the
// report never says that memory ran out, and the session says the
// container went.
func TestAContainerKilledOutsideIsNotReportedAsOOM(t *testing.T) {
	c := testClient(t)
	t.Parallel()
	sess := newSession(t, c, sandbox.Spec{Policy: sandbox.Policy{Resources: sandbox.Resources{MemoryBytes: 256 << 20}}})
	cid, _ := ContainerID(sess.State())
	go func() {
		time.Sleep(time.Second)
		_, _ = c.api.ContainerKill(context.Background(), cid, client.ContainerKillOptions{Signal: "KILL"})
	}()
	res, err := sandbox.Exec(testCtx(t), sess, sandbox.ExecRequest{Cmd: []string{"sleep", "30"}})
	t.Logf("result %+v, %v", res.ExitStatus, err)
	if res.OOMKilled || len(res.Violations) > 0 || err != nil && strings.Contains(err.Error(), "memory") {
		t.Fatalf("a container killed outside agentbox reported as %+v, %v", res.ExitStatus, err)
	}
	// The engine may not have seen the container end yet when the
	// command's exit is read; the next call knows.
	if err == nil {
		_, err = sandbox.Exec(testCtx(t), sess, sandbox.ExecRequest{Cmd: []string{"true"}})
	}
	if err == nil || !strings.Contains(err.Error(), "outside agentbox") {
		t.Fatalf("exec: %v; want it to say the container was stopped or killed outside agentbox", err)
	}
}

// TestCommandsAreTheOOMKillersFirstChoice: under memory pressure the
// kernel takes a command before the init, whose end would end the
// session.
func TestCommandsAreTheOOMKillersFirstChoice(t *testing.T) {
	c := testClient(t)
	t.Parallel()
	sess := newSession(t, c, sandbox.Spec{})
	if got := string(run(t, sess, "cat /proc/self/oom_score_adj /proc/1/oom_score_adj").Stdout); got != "500\n0\n" {
		t.Fatalf("oom_score_adj of a command and of the init: %q, want 500 and 0", got)
	}
	if got := string(run(t, sess, "echo -1 >/proc/self/oom_score_adj 2>/dev/null || echo refused").Stdout); got != "refused\n" {
		t.Fatalf("a command lowering its score below the init's: %q, want refused", got)
	}
}

// TestASessionHasHalfACPUShareByDefault: with no --cpus a session still
// yields to the host's own work under contention (half a default
// container's share; the engine turns shares into a cgroup2 weight).
func TestASessionHasHalfACPUShareByDefault(t *testing.T) {
	c := testClient(t)
	if !c.engine.cpuShares {
		testenv.Skipf(t, "the engine reports no CPU shares support: no share is set")
	}
	t.Parallel()
	sess := newSession(t, c, sandbox.Spec{})
	got := strings.TrimSpace(string(run(t, sess, "cat /sys/fs/cgroup/cpu/cpu.shares 2>/dev/null || cat /sys/fs/cgroup/cpu.weight").Stdout))
	if got != "512" && got != "20" {
		t.Fatalf("the session's CPU share: %q, want cpu.shares 512 (cgroup v1) or cpu.weight 20 (v2)", got)
	}
}

// TestTmpfsWritesCountInTheMemoryLimit: what a command writes to /tmp or
// /dev/shm (each a tmpfs) is memory the session's limit counts, and each
// has a size of its own whatever the engine's default.
func TestTmpfsWritesCountInTheMemoryLimit(t *testing.T) {
	c := testClient(t)
	t.Parallel()
	sess := newSession(t, c, sandbox.Spec{Policy: sandbox.Policy{Resources: sandbox.Resources{MemoryBytes: 48 << 20}}})
	for _, dir := range []string{"/tmp", "/dev/shm"} {
		res := run(t, sess, "dd if=/dev/zero of="+dir+"/fill bs=1M count=96 2>&1; rm -f "+dir+"/fill")
		if res.ExitCode == 0 && !res.OOMKilled && strings.Contains(string(res.Stdout), "96+0 records out") {
			t.Errorf("96 MiB went to %s under a 48 MiB limit: %s", dir, res.Stdout)
		}
	}
	if got := string(run(t, sess, "df -k /dev/shm | awk 'NR==2 {print $2}'").Stdout); got != "65536\n" {
		t.Errorf("/dev/shm is %q KiB, want 65536", got)
	}
}

// TestAnExecTheEngineCannotStartIsAnError: the engine's exit code of an
// exec it could not start (126) is no command's; the caller hears why it
// did not start, and the session goes on.
func TestAnExecTheEngineCannotStartIsAnError(t *testing.T) {
	c := testClient(t)
	t.Parallel()
	sess := newSession(t, c, sandbox.Spec{})
	res, err := sandbox.Exec(testCtx(t), sess, sandbox.ExecRequest{Cmd: []string{"true"}, Workdir: "/no/such/dir"})
	if err == nil || !strings.Contains(err.Error(), "did not start") || !strings.Contains(err.Error(), "/no/such/dir") {
		t.Fatalf("exec in a missing workdir: %+v, %v; want an error saying the command did not start, and why", res.ExitStatus, err)
	}
	if again := run(t, sess, "echo on"); string(again.Stdout) != "on\n" {
		t.Fatalf("the next command: %+v, %q", again.ExitStatus, again.Stdout)
	}
}
