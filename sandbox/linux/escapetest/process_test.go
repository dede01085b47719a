package escapetest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/sandbox"
)

func TestPtracingAnotherProcessFails(t *testing.T) {
	for _, who := range bothUsers(t) {
		t.Run(who.name, func(t *testing.T) {
			cases := []struct {
				name string
				args []string
			}{
				{"PTRACE_ATTACH to a sibling", []string{"ptrace-sibling"}},
				{"PTRACE_SEIZE of a sibling", []string{"ptrace-sibling", "seize"}},
				{"PTRACE_ATTACH to the init", []string{"ptrace", "1"}},
				{"PTRACE_ATTACH to the test process's host pid", []string{"ptrace", strconv.Itoa(os.Getpid())}},
			}
			var list [][]string
			for _, c := range cases {
				list = append(list, c.args)
			}
			results := batch(t, who.s, list)
			for i, c := range cases {
				want := []string{"EPERM"}
				if i == 3 {
					want = append(want, "ESRCH")
				}
				t.Run(c.name+" fails", func(t *testing.T) { results[i].failed(t, want...) })
			}
		})
	}
}

func TestSeeingOrSignallingHostPidsFails(t *testing.T) {
	hostPid := strconv.Itoa(os.Getpid())
	// A host process of the sandbox's own uid: signalling "every process
	// I may signal" must not reach it.
	victim := exec.Command("sleep", "60")
	victim.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 1000, Gid: 1000}}
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { victim.Process.Kill(); victim.Wait() }()
	victimPid := strconv.Itoa(victim.Process.Pid)
	for _, who := range bothUsers(t) {
		t.Run(who.name, func(t *testing.T) {
			t.Run("/proc lists only the sandbox's processes", func(t *testing.T) {
				// What ps would show, without depending on procps.
				r := sh(t, who.s, `for p in /proc/[0-9]*; do echo "${p#/proc/} $(cat $p/comm)"; done`)
				lines := strings.Split(strings.TrimSpace(string(r.Stdout)), "\n")
				if len(lines) > 8 {
					t.Errorf("/proc lists %d processes:\n%s", len(lines), r.Stdout)
				}
				for _, l := range lines {
					f := strings.Fields(l)
					if len(f) < 2 {
						continue
					}
					// pid 1 is the session's init, a re-execution of
					// this test binary (hence its comm); anything else
					// named like it would be the host's test process.
					if f[0] == hostPid || f[0] == victimPid || f[1] == "sleep" || (f[0] != "1" && strings.HasSuffix(f[1], ".test")) {
						t.Errorf("/proc inside shows a host process: %q\n%s", l, r.Stdout)
					}
				}
			})
			t.Run("the host pid has no /proc entry", func(t *testing.T) {
				if r := sh(t, who.s, "cat /proc/"+hostPid+"/cmdline"); r.ExitCode == 0 {
					t.Errorf("/proc/%s is visible inside: %q", hostPid, r.Stdout)
				}
			})
			results := batch(t, who.s, [][]string{
				{"kill", hostPid, "0"}, {"pidfd-open", hostPid}, {"kill", victimPid, "0"}, {"pidfd-open", victimPid},
			})
			for _, o := range results {
				t.Run(o.args[0]+" of the host's pid "+o.args[1]+" fails", func(t *testing.T) { o.failed(t, "ESRCH") })
			}
			t.Run("SIGKILL to the init leaves it running", func(t *testing.T) {
				// The kernel drops SIGKILL sent to a pid namespace's init
				// from inside it, so kill may even report success.
				got, _ := attack(t, who.s, "kill", "1", "9")
				t.Logf("kill(1, SIGKILL) returned %s", got)
				if r := sh(t, who.s, "true"); r.ExitCode != 0 {
					t.Fatalf("ESCAPE: the session's init died of a signal from inside (exit %d)", r.ExitCode)
				}
			})
			t.Run("SIGKILL to every process (kill -1)", func(t *testing.T) {
				attack(t, who.s, "kill", "-1", "9")
				if err := victim.Process.Signal(syscall.Signal(0)); err != nil {
					t.Fatalf("ESCAPE: kill(-1, SIGKILL) inside killed the host's uid-1000 process: %v", err)
				}
			})
			t.Run("the session survives", func(t *testing.T) {
				if r := sh(t, who.s, "true"); r.ExitCode != 0 {
					t.Fatalf("exit %d", r.ExitCode)
				}
			})
		})
	}
}

func TestReadingTheHostEnvironmentFails(t *testing.T) {
	// hostEnvSecret was set in the test process before any session
	// started; a per-test one makes sure of a fresh session too.
	t.Setenv("AGENTBOX_ESCAPETEST_TEST_SECRET", "test-env-"+hostEnvValue)
	sessions := append(bothUsers(t), namedSession{"in a session created after the variable was set", newSession(t, sandbox.Spec{})})
	for _, who := range sessions {
		t.Run(who.name, func(t *testing.T) {
			for _, c := range []struct{ name, script string }{
				{"env", "env"},
				{"/proc/self/environ", "cat /proc/self/environ"},
				{"the init's /proc/1/environ", "cat /proc/1/environ"},
				{"every process's environ", "cat /proc/[0-9]*/environ"},
				{"the init's command line", "cat /proc/1/cmdline"},
			} {
				t.Run(c.name, func(t *testing.T) {
					r := sh(t, who.s, c.script+" 2>&1")
					if strings.Contains(string(r.Stdout), hostEnvValue) {
						t.Fatalf("ESCAPE: %s shows the host's environment:\n%s", c.name, r.Stdout)
					}
				})
			}
		})
	}
}

func TestAForkBombIsBoundedByThePidsLimit(t *testing.T) {
	const limit = 64
	spec := sandbox.Spec{Policy: sandbox.Policy{Resources: sandbox.Resources{Pids: limit}}}
	if !enforces(newClient(t), sandbox.PartPids) {
		assertRefused(t, spec, sandbox.PartPids)
		return
	}
	s := newSession(t, spec)
	t.Run("forking until refused stops at the limit", func(t *testing.T) {
		r := execIn(t, s, sandbox.ExecRequest{Cmd: []string{helper, "forkbomb", "1000"}, Timeout: 20 * time.Second})
		got, out := parseResult(t, []string{"forkbomb"}, r)
		var started, tasks int
		fmt.Sscanf(out[strings.Index(out, "started:"):], "started: %d\ntasks: %d", &started, &tasks)
		t.Logf("started %d children, %d tasks in the sandbox besides the init, then %s", started, tasks, got)
		if got == "ok" {
			t.Fatalf("ESCAPE: 1000 processes started under a limit of %d", limit)
		}
		if got != "EAGAIN" {
			t.Errorf("fork failed with %s, want EAGAIN (the pids controller)", got)
		}
		if tasks > limit {
			t.Errorf("%d tasks in the sandbox besides the init, above the limit %d", tasks, limit)
		}
		if started < limit/2 {
			t.Errorf("only %d children before the refusal: the limit was not what stopped it", started)
		}
	})
	t.Run("a shell fork bomb returns at its timeout", func(t *testing.T) {
		start := time.Now()
		r := execIn(t, s, sandbox.ExecRequest{Cmd: []string{"sh", "-c", "b() { b | b & }; b; sleep 30"}, Timeout: 2 * time.Second})
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("the exec returned after %s", d)
		}
		t.Logf("exit %d, timed out %v, after %s", r.ExitCode, r.TimedOut, time.Since(start).Round(time.Millisecond))
	})
	t.Run("the session stays usable", func(t *testing.T) {
		var r sandbox.ExecResult
		for i := 0; i < 50; i++ {
			if r = sh(t, s, "true"); r.ExitCode == 0 {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("exec after the bomb: exit %d %s", r.ExitCode, r.Stderr)
	})
}

func TestAMemoryBombIsOOMKilled(t *testing.T) {
	spec := sandbox.Spec{Policy: sandbox.Policy{Resources: sandbox.Resources{MemoryBytes: 64 << 20}}}
	if !enforces(newClient(t), sandbox.PartMemory) {
		assertRefused(t, spec, sandbox.PartMemory)
		return
	}
	s := newSession(t, spec)
	r := execIn(t, s, sandbox.ExecRequest{Cmd: []string{helper, "alloc", "512"}, Timeout: 30 * time.Second})
	if strings.Contains(string(r.Stdout), "allocated: 512") {
		t.Fatalf("ESCAPE: allocated 512 MiB under a 64 MiB limit")
	}
	if !r.OOMKilled {
		t.Errorf("OOMKilled = false (exit %d %s, timed out %v)", r.ExitCode, r.Signal, r.TimedOut)
	}
	if r.ExitCode != 137 {
		t.Errorf("exit code %d, want 137", r.ExitCode)
	}
	if !strings.Contains(strings.Join(r.Violations, "\n"), "memory") {
		t.Errorf("violations %q do not report the memory limit", r.Violations)
	}
	if r := sh(t, s, "true"); r.ExitCode != 0 {
		t.Errorf("exec after the OOM kill: exit %d", r.ExitCode)
	}
}

func TestFillingTheDiskPastTheQuotaFails(t *testing.T) {
	const quota = 16 << 20
	spec := sandbox.Spec{Policy: sandbox.Policy{Resources: sandbox.Resources{DiskBytes: quota}}}
	if !enforces(newClient(t), sandbox.PartDisk) {
		assertRefused(t, spec, sandbox.PartDisk)
		return
	}
	s := newSession(t, spec)
	cases := []struct{ name, dir, mib, files string }{
		{"one file past the quota", "/workspace", "64", "1"},
		{"many files past the quota", "/workspace", "4", "16"},
		{"/tmp past the quota", "/tmp", "4", "16"},
		{"/dev/shm past the quota", "/dev/shm", "4", "16"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := execIn(t, s, sandbox.ExecRequest{Cmd: []string{helper, "fill", c.dir, c.mib, c.files}, Timeout: 30 * time.Second})
			got, out := parseResult(t, []string{"fill"}, r)
			var written int64
			fmt.Sscanf(out[strings.Index(out, "written:"):], "written: %d", &written)
			t.Logf("wrote %d MiB into %s, then %s", written>>20, c.dir, got)
			if got == "ok" {
				t.Fatalf("ESCAPE: wrote %d MiB into %s under a %d MiB quota", written>>20, c.dir, quota>>20)
			}
			if !contains([]string{"ENOSPC", "EDQUOT", "EFBIG"}, got) {
				t.Errorf("the fill failed with %s, want ENOSPC, EDQUOT or EFBIG", got)
			}
			if written > quota {
				t.Errorf("wrote %d bytes, past the quota of %d", written, quota)
			}
			if r := sh(t, s, "rm -f "+c.dir+"/fill.*"); r.ExitCode != 0 {
				t.Fatalf("clean up: %s", r.Stderr)
			}
		})
	}
	t.Run("the host's workspace stays within the quota", func(t *testing.T) {
		var total int64
		filepath.Walk(s.State().Workspace, func(_ string, fi os.FileInfo, err error) error {
			if err == nil && fi.Mode().IsRegular() {
				total += fi.Size()
			}
			return nil
		})
		if total > quota {
			t.Errorf("the host's workspace holds %d bytes", total)
		}
	})
}

func TestExceedingTheTimeoutKillsTheWholeTree(t *testing.T) {
	s := newSession(t, sandbox.Spec{})
	cases := []struct{ name, script string }{
		{"a background child", "sleep 100 & echo $! > /workspace/p.pid; sleep 100"},
		{"a setsid'ed grandchild", "setsid sh -c 'echo $$ > /workspace/p.pid; exec sleep 100' & sleep 100"},
		{"a double-forked daemon with closed stdio", "(setsid sh -c 'echo $$ > /workspace/p.pid; exec sleep 100' </dev/null >/dev/null 2>&1 &); sleep 100"},
		{"a process that ignores SIGTERM and SIGHUP", "sh -c 'trap \"\" TERM HUP INT; echo $$ > /workspace/p.pid; while :; do sleep 1; done' & sleep 100"},
		{"a process that keeps forking", "sh -c 'echo $$ > /workspace/p.pid; while :; do (sleep 100 &); done' & sleep 100"},
		{"a stopped process", "sh -c 'echo $$ > /workspace/p.pid; kill -STOP $$' & sleep 100"},
	}
	for _, c := range cases {
		t.Run(c.name+" dies", func(t *testing.T) {
			sh(t, s, "rm -f /workspace/p.pid")
			start := time.Now()
			r := execIn(t, s, sandbox.ExecRequest{Cmd: []string{"sh", "-c", c.script}, Timeout: 500 * time.Millisecond})
			if !r.TimedOut {
				t.Errorf("TimedOut = false (exit %d)", r.ExitCode)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("the exec returned %s after a 500ms timeout", d)
			}
			left := sh(t, s, `p=$(cat /workspace/p.pid) || exit 3; kill -0 $p 2>/dev/null && echo "alive $p"; `+
				`for d in /proc/[0-9]*; do [ "$d" = /proc/1 ] || [ "$d" = /proc/$$ ] && continue; `+
				`a=$(tr '\0' ' ' < $d/cmdline 2>/dev/null) && [ -n "$a" ] && echo "${d#/proc/} $a"; done | grep -a -v -e '^[0-9]* tr ' -e '^[0-9]* grep ' -e '^[0-9]* sh -c p='`)
			if left.ExitCode == 3 {
				t.Fatalf("the command never wrote its pid file (the timeout came first?)")
			}
			if out := strings.TrimSpace(string(left.Stdout)); out != "" {
				t.Errorf("ESCAPE: processes outlived the timeout:\n%s", out)
			}
		})
	}
	t.Run("the session timeout ends every process of the session", func(t *testing.T) {
		c := newClient(t)
		s2, err := c.Create(context.Background(), withHelper(sandbox.Spec{Policy: sandbox.Policy{Resources: sandbox.Resources{SessionTimeout: time.Second}}}))
		if err != nil {
			t.Fatal(err)
		}
		defer s2.Close(context.Background())
		initPid := s2.State().Handles["init_pid"]
		pidNS, err := os.Readlink("/proc/" + initPid + "/ns/pid")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		p, err := s2.Start(ctx, sandbox.ExecRequest{Cmd: []string{"sh", "-c", "setsid sleep 100 & trap '' TERM; sleep 100"}})
		if err != nil {
			t.Fatal(err)
		}
		p.Stdin().Close()
		if _, err := p.Wait(ctx); err != nil {
			t.Logf("wait: %v", err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			left := processesIn(pidNS)
			if len(left) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("ESCAPE: host pids %v of the session outlived its timeout", left)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if _, err := s2.Exec(context.Background(), sandbox.ExecRequest{Cmd: []string{"true"}}); err == nil {
			t.Errorf("an exec after the session timeout succeeded")
		}
	})
}

// processesIn lists the host pids of processes in the pid namespace ns
// (a readlink of /proc/PID/ns/pid).
func processesIn(ns string) []int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var out []int
	for _, d := range dirs {
		if l, err := os.Readlink(d + "/ns/pid"); err == nil && l == ns {
			n, _ := strconv.Atoi(filepath.Base(d))
			out = append(out, n)
		}
	}
	return out
}

func TestReadingAnotherSessionsWorkspaceFails(t *testing.T) {
	ctx := context.Background()
	a := newSession(t, sandbox.Spec{})
	b := newSession(t, sandbox.Spec{})
	want := secret(t)
	if err := a.WriteFile(ctx, "secret.txt", []byte(want), 0o644); err != nil {
		t.Fatal(err)
	}
	srv, err := a.Start(ctx, sandbox.ExecRequest{Cmd: []string{helper, "serve", "127.0.0.1:7777", want}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Kill(ctx)
	buf := make([]byte, 64)
	if n, _ := srv.Stdout().Read(buf); !strings.Contains(string(buf[:n]), "listening") {
		t.Fatalf("the listener in session A did not start: %q", buf[:n])
	}
	if r := sh(t, a, "cat /workspace/secret.txt"); string(r.Stdout) != want {
		t.Fatalf("session A cannot read its own file: %q %s", r.Stdout, r.Stderr)
	}
	aWS := a.State().Workspace
	aInit := a.State().Handles["init_pid"]
	paths := []string{
		aWS + "/secret.txt",
		"/proc/" + aInit + "/root/workspace/secret.txt",
		"/proc/" + aInit + "/cwd/secret.txt",
	}
	for _, p := range paths {
		t.Run("reading "+p+" from session B", func(t *testing.T) {
			got, out := attack(t, b, "read", p)
			if got == "ok" || strings.Contains(out, want) {
				t.Fatalf("ESCAPE: session B read session A's file:\n%s", out)
			}
		})
	}
	t.Run("searching session B's filesystem for the file", func(t *testing.T) {
		r := sh(t, b, "find / -xdev -name secret.txt 2>/dev/null; find /workspace /tmp -name secret.txt")
		if strings.Contains(string(r.Stdout), "secret.txt") {
			t.Fatalf("ESCAPE: session B sees %s", r.Stdout)
		}
	})
	t.Run("reaching session A's loopback listener from session B", func(t *testing.T) {
		connectFails(t, b, nil, []string{"ECONNREFUSED"}, "connect", "127.0.0.1:7777")
	})
	t.Run("ReadFile through session B with a path climbing out", func(t *testing.T) {
		rel, _ := filepath.Rel(b.State().Workspace, aWS)
		if data, err := b.ReadFile(ctx, rel+"/secret.txt"); err == nil && strings.Contains(string(data), want) {
			t.Fatalf("ESCAPE: session B's ReadFile returned session A's file")
		}
	})
	t.Run("session A still serves itself", func(t *testing.T) {
		if got, out := attack(t, a, "connect", "127.0.0.1:7777"); got != "ok" || !strings.Contains(out, want) {
			t.Errorf("the control attack in session A failed: %s", out)
		}
	})
}
