package escapetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
)

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
	if c := newClient(t); !enforces(c, sandbox.PartTimeout) {
		testenv.Skipf(t, "this host cannot enforce %s (each command's tree needs a group of its own)", sandbox.PartTimeout)
	}
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
		initPid := initPID(t, s2)
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
		if _, err := sandbox.Exec(context.Background(), s2, sandbox.ExecRequest{Cmd: []string{"true"}}); err == nil {
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

// TestFloodingTheHostWithOutputIsCapped writes far more than the output
// cap on both streams: the host keeps only the cap of each (its memory is
// what the flood attacks), says it truncated, and the exec still returns.
func TestFloodingTheHostWithOutputIsCapped(t *testing.T) {
	const limit = 64 << 10
	s := newSession(t, sandbox.Spec{Policy: sandbox.Policy{Resources: sandbox.Resources{OutputBytes: limit}}})
	r := execIn(t, s, sandbox.ExecRequest{Cmd: []string{"sh", "-c", "head -c 64m /dev/zero; head -c 64m /dev/zero >&2"}, Timeout: 60 * time.Second})
	if len(r.Stdout) > limit || len(r.Stderr) > limit {
		t.Errorf("kept %d bytes of stdout and %d of stderr, above the cap of %d", len(r.Stdout), len(r.Stderr), limit)
	}
	if !r.OutputTruncated {
		t.Errorf("OutputTruncated = false after 64 MiB on each stream")
	}
	if r.ExitCode != 0 {
		t.Errorf("exit %d: the flood was not drained to its end", r.ExitCode)
	}
}
