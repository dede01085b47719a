package docker

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/sandboxtest"
)

// TestTimeoutKillsCommandThatTampersWithItsPidFile runs commands that try
// to steer their own timeout kill through what the container holds about
// them (agentbox once kept the pid in /tmp/.agentbox-exec-<tag>, writable
// by the command): each must still end at its timeout, reported as timed
// out, with nothing of it left running.
func TestTimeoutKillsCommandThatTampersWithItsPidFile(t *testing.T) {
	c := testClient(t)
	t.Parallel()
	sess := newSession(t, c, sandbox.Spec{})
	// %d is the sleep's length, one per case, to tell survivors apart.
	cases := []struct {
		name, script string
		tty          bool
	}{
		{"a command that deletes the pid files", `rm -f /tmp/.agentbox-exec-*; exec sleep %d`, false},
		{"a command that points the pid files at init", `for f in /tmp/.agentbox-exec-*; do echo 1 >"$f"; done; exec sleep %d`, false},
		{"a command that points the pid files at its own child", `sleep %[1]d & for f in /tmp/.agentbox-exec-*; do echo $! >"$f"; done; exec sleep %[1]d`, false},
		{"a command that empties all it can write in /tmp", `find /tmp -mindepth 1 -user "$(id -u)" -exec rm -rf {} + 2>/dev/null; exec sleep %d`, false},
		{"a command that reads its own stdout pipe back", `exec 3</proc/self/fd/1; cat <&3 >/dev/null & exec sleep %d`, false},
		{"a terminal command that deletes the pid files", `rm -f /tmp/.agentbox-exec-*; exec sleep %d`, true},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			secs := 1000 + i
			timesOut(t, sess, sandbox.ExecRequest{Cmd: []string{"sh", "-c", fmt.Sprintf(tc.script, secs)}, TTY: tc.tty, Timeout: time.Second})
			noneLeft(t, sess, secs)
		})
	}
}

// TestTimeoutKillsCommandThatClosesItsOutput: the end of the attach
// stream does not mean the command ended; a command that closes its
// stdout and stderr and goes on must still be killed at its timeout.
func TestTimeoutKillsCommandThatClosesItsOutput(t *testing.T) {
	c := testClient(t)
	t.Parallel()
	sess := newSession(t, c, sandbox.Spec{})
	for i, tty := range []bool{false, true} {
		t.Run(fmt.Sprintf("tty=%v", tty), func(t *testing.T) {
			secs := 1100 + i
			timesOut(t, sess, sandbox.ExecRequest{Cmd: []string{"sh", "-c", fmt.Sprintf(`exec </dev/null >/dev/null 2>&1; exec sleep %d`, secs)}, TTY: tty, Timeout: time.Second})
			noneLeft(t, sess, secs)
		})
	}
}

// timesOut runs req, which should outlive its timeout, and wants it
// reported as timed out and killed within a few seconds of the timeout.
func timesOut(t *testing.T, sess sandbox.Session, req sandbox.ExecRequest) {
	t.Helper()
	res, took, err := execWithin(t, sess, req, req.Timeout+15*time.Second)
	if err != nil {
		t.Fatalf("exec: %v", err)
	}
	if !res.TimedOut || res.Signal != "SIGKILL" {
		t.Fatalf("result %+v; want timed out and killed by SIGKILL", res.ExitStatus)
	}
	if took > req.Timeout+5*time.Second {
		t.Errorf("the %s timeout took %s to end the command", req.Timeout, took.Round(time.Millisecond))
	}
}

// noneLeft wants no "sleep <secs>" running in the session.
func noneLeft(t *testing.T, sess sandbox.Session, secs int) {
	t.Helper()
	res := run(t, sess, fmt.Sprintf(`for p in /proc/[0-9]*; do tr '\0' ' ' <$p/cmdline 2>/dev/null; echo; done | grep -c '^sleep %d' || true`, secs))
	if n := strings.TrimSpace(string(res.Stdout)); n != "0" {
		t.Fatalf("%s of its sleeps survived the timeout (stderr %q)", n, res.Stderr)
	}
}

// TestKillRacingTheStartEndsTheCommand kills commands at once after the
// start, before or while the wrapper hands over the pid: none may run on.
func TestKillRacingTheStartEndsTheCommand(t *testing.T) {
	c := testClient(t)
	t.Parallel()
	sess := newSession(t, c, sandbox.Spec{})
	ctx := testCtx(t)
	for i := 0; i < 10; i++ {
		for _, tty := range []bool{false, true} {
			p, err := sess.Start(ctx, sandbox.ExecRequest{Cmd: []string{"sleep", "1200"}, TTY: tty})
			if err != nil {
				t.Fatal(err)
			}
			if i%2 == 1 {
				time.Sleep(time.Duration(i) * time.Millisecond)
			}
			if err := p.Kill(ctx); err != nil {
				t.Fatal(err)
			}
			st, err := p.Wait(ctx)
			if err != nil || st.ExitCode != 137 || st.Signal != "SIGKILL" {
				t.Fatalf("round %d, tty %v: wait: %+v, %v; want exit 137 by SIGKILL", i, tty, st, err)
			}
		}
	}
	noneLeft(t, sess, 1200)
}

// TestKillAndWaitDoNotQueueBehindUnreadOutput: the engine stops answering
// about a container (no exec starts, no kill) while an exec that ended
// cannot hand over the rest of its output; a Kill of a command whose
// output nobody reads must take that output in.
func TestKillAndWaitDoNotQueueBehindUnreadOutput(t *testing.T) {
	c := testClient(t)
	t.Parallel()
	sandboxtest.KillUnreadOutput(t, newSession(t, c, sandbox.Spec{}))
}
