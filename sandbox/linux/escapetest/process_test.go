package escapetest

import (
	"context"
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
				t.Run(c.name+" fails", func(t *testing.T) { results[i].Failed(t, want...) })
			}
		})
	}
}

func TestSeeingOrSignallingHostPidsFails(t *testing.T) {
	hostPid := strconv.Itoa(os.Getpid())
	// A host process of the sandbox's own uid: signalling "every process
	// I may signal" must not reach it.
	victim := exec.Command("sleep", "60")
	if !rootless() { // rootless, the sandbox's uid is this process's own
		victim.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 1000, Gid: 1000}}
	}
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
				t.Run(o.Args[0]+" of the host's pid "+o.Args[1]+" fails", func(t *testing.T) { o.Failed(t, "ESRCH") })
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

// The init carries the host's state directory for gc (in its
// environment): no process of the sandbox reads it there, nor in the
// init's command line.
func TestTheInitDoesNotShowTheHostsStateDirectory(t *testing.T) {
	if !filepath.IsAbs(stateDir) {
		t.Fatalf("the state directory %q is not absolute", stateDir)
	}
	for _, who := range bothUsers(t) {
		t.Run(who.name, func(t *testing.T) {
			for _, c := range []struct{ name, script string }{
				{"the init's command line", "cat /proc/1/cmdline"},
				{"the init's environment", "cat /proc/1/environ"},
				{"every process's command line and environment", "cat /proc/[0-9]*/cmdline /proc/[0-9]*/environ"},
			} {
				t.Run(c.name, func(t *testing.T) {
					r := sh(t, who.s, c.script+" 2>&1")
					if strings.Contains(string(r.Stdout), stateDir) {
						t.Fatalf("ESCAPE: %s names the host's state directory %s:\n%s", c.name, stateDir, r.Stdout)
					}
				})
			}
		})
	}
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
	aInit := initPID(t, a)
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

// TestSignallingTheInitFromInsideLeavesTheSessionRunning sends every
// signal to the session's init as root inside, where the uid check
// allows it: with kill to pid 1, and to each of its threads with tgkill
// and queued with SI_QUEUE. kill reaches the main thread, outside the
// commands' landlock domain (its signal scope refuses); the confined
// spawning thread is inside it, so a thread-directed signal gets there.
// The init must survive them all: a pid namespace's init gets only the
// signals it has a handler for, and a Go program has one for almost
// every signal (exiting, dumping, or crashing on a queued SIGSEGV it
// takes for a real fault) unless told otherwise.
func TestSignallingTheInitFromInsideLeavesTheSessionRunning(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	s, err := c.Create(ctx, withHelper(sandbox.Spec{User: "0"}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	// Every signal number but SIGCHLD (17), including the fault signals
	// and real-time ones; SIGKILL and SIGSTOP last.
	var signals []string
	for sig := 1; sig <= 64; sig++ {
		if sig != 9 && sig != 17 && sig != 19 && (sig <= 31 || sig == 34 || sig == 64) {
			signals = append(signals, strconv.Itoa(sig))
		}
	}
	signals = append(signals, "9", "19")
	for _, sig := range signals {
		got, out := attack(t, s, "signal-init-threads", sig)
		if got != "ok" {
			// The confined thread shares the command's domain: at least it
			// must have taken the signal, or this test tests nothing.
			t.Fatalf("signal %s reached none of the init's threads: %s", sig, out)
		}
		if _, err := sandbox.Exec(ctx, s, sandbox.ExecRequest{Cmd: []string{"true"}}); err != nil {
			t.Fatalf("a command killed its session's init with signal %s sent to its threads: %v", sig, err)
		}
	}
	args := []string{helper, "batch"}
	for _, sig := range signals {
		args = append(args, "kill 1 "+sig)
	}
	r, err := sandbox.Exec(ctx, s, sandbox.ExecRequest{Cmd: args, Timeout: 20 * time.Second})
	t.Logf("signals %v to pid 1: %q, %v", signals, r.Stdout, err)
	time.Sleep(100 * time.Millisecond)
	if _, err := sandbox.Exec(ctx, s, sandbox.ExecRequest{Cmd: []string{"true"}}); err != nil {
		t.Fatalf("a command killed its session's init with a signal to pid 1: %v", err)
	}
}
