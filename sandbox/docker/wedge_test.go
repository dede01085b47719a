package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/sandbox"
)

// stopOthers is a command whose detached child, its output off the
// exec's streams, SIGSTOPs every process it may signal but init, itself
// and the command's main shell, over and over: agentbox's helper execs
// among them. After %d rounds (0: never) the child SIGKILLs the main
// shell, which meanwhile waits for it (a child of its own would be
// stopped).
const stopOthers = `main=$$; (exec </dev/null >/dev/null 2>&1; me=$(exec sh -c 'echo $PPID'); n=0; while :; do n=$((n+1)); [ $n = %d ] && kill -KILL $main; for d in /proc/[0-9]*; do p=${d#/proc/}; [ $p = $me ] || [ $p = $main ] || [ $p = 1 ] || kill -STOP $p 2>/dev/null; done; done) & wait`

// execWithin runs req and fails the test when Exec does not return
// within limit.
func execWithin(t *testing.T, sess sandbox.Session, req sandbox.ExecRequest, limit time.Duration) (sandbox.ExecResult, time.Duration, error) {
	t.Helper()
	type result struct {
		res sandbox.ExecResult
		err error
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		res, err := sandbox.Exec(context.Background(), sess, req)
		done <- result{res, err}
	}()
	select {
	case r := <-done:
		return r.res, time.Since(start), r.err
	case <-time.After(limit):
		t.Fatalf("exec %q still runs after %s", req.Cmd, limit)
	}
	panic("unreachable")
}

// closeWithin wants Close to return within limit.
func closeWithin(t *testing.T, sess sandbox.Session, limit time.Duration) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- sess.Close(context.Background()) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("close: %v", err)
		}
	case <-time.After(limit):
		t.Fatalf("close still runs after %s", limit)
	}
}

// TestExitBySIGKILLWhileHelpersAreStopped: a command whose main process
// dies by a SIGKILL agentbox did not send makes agentbox probe the
// container's OOM counter with a helper exec; a child that stops every
// process it can reach must not keep that probe, and so Exec, from
// returning.
func TestExitBySIGKILLWhileHelpersAreStopped(t *testing.T) {
	c := testClient(t)
	t.Parallel()
	cases := []struct {
		name string
		user string
	}{
		// The probe runs as root: a command of another uid cannot
		// signal it, and the answer is exact.
		{"as the default user the probe cannot be stopped", ""},
		// A root command can stop it: the probe's deadline ends the
		// wait, and the result names no cause (it may not guess OOM).
		{"as root the stopped probe is given up", "0:0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sess, err := c.Create(testCtx(t), sandbox.Spec{User: tc.user, Policy: sandbox.Policy{Resources: sandbox.Resources{MemoryBytes: 256 << 20}}})
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			t.Cleanup(func() { _ = sess.Close(context.Background()) })
			res, took, err := execWithin(t, sess, sandbox.ExecRequest{Cmd: []string{"sh", "-c", fmt.Sprintf(stopOthers, 300)}, Timeout: 30 * time.Second}, 40*time.Second)
			t.Logf("ended after %s: %+v, %v", took.Round(time.Millisecond), res.ExitStatus, err)
			if err != nil {
				t.Fatalf("exec: %v", err)
			}
			if res.ExitCode != 137 || res.Signal != "SIGKILL" || res.TimedOut || res.OOMKilled {
				t.Fatalf("result %+v; want exit 137 by SIGKILL, not timed out, not OOM-killed", res.ExitStatus)
			}
			if len(res.Violations) > 0 {
				t.Fatalf("violations %q; a SIGKILL the kernel's OOM counter does not explain is no violation", res.Violations)
			}
			if tc.user == "" && took > 10*time.Second {
				t.Fatalf("the probe as root was held up: took %s", took.Round(time.Millisecond))
			}
			closeWithin(t, sess, 30*time.Second)
		})
	}
}

// TestTimeoutKillsCommandThatStopsTheKiller: the killer must run as the
// command's uid (a root helper has no CAP_KILL in the container and
// cannot signal another uid), so the command can SIGSTOP it; the timeout
// must hold anyway, by killing the container, and say so.
func TestTimeoutKillsCommandThatStopsTheKiller(t *testing.T) {
	c := testClient(t)
	t.Parallel()
	for _, user := range []string{"", "0:0"} {
		t.Run("user="+user, func(t *testing.T) {
			t.Parallel()
			sess, err := c.Create(testCtx(t), sandbox.Spec{User: user})
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			t.Cleanup(func() { _ = sess.Close(context.Background()) })
			res, took, err := execWithin(t, sess, sandbox.ExecRequest{Cmd: []string{"sh", "-c", fmt.Sprintf(stopOthers, 0)}, Timeout: time.Second}, 30*time.Second)
			t.Logf("ended after %s: %+v, %v", took.Round(time.Millisecond), res.ExitStatus, err)
			if !res.TimedOut {
				t.Fatalf("result %+v, %v; want timed out", res.ExitStatus, err)
			}
			if !errors.Is(err, sandbox.ErrClosed) || !strings.Contains(err.Error(), "could not be killed from inside") {
				t.Fatalf("exec: %v; want ErrClosed saying the container was killed and why", err)
			}
			_, err = sandbox.Exec(testCtx(t), sess, sandbox.ExecRequest{Cmd: []string{"true"}})
			if !errors.Is(err, sandbox.ErrClosed) || !strings.Contains(err.Error(), "could not be killed from inside") {
				t.Fatalf("exec after the container kill: %v; want ErrClosed saying why", err)
			}
			closeWithin(t, sess, 30*time.Second)
		})
	}
}

// TestStdinCloseDoesNotWaitForACommandThatDoesNotRead: a Write of more
// input than the pipes hold blocks while the command does not read;
// closing the input must not wait for it, and Kill and the session's
// Close must end it all.
func TestStdinCloseDoesNotWaitForACommandThatDoesNotRead(t *testing.T) {
	c := testClient(t)
	t.Parallel()
	for _, tty := range []bool{false, true} {
		t.Run(fmt.Sprintf("tty=%v", tty), func(t *testing.T) {
			t.Parallel()
			sess, err := c.Create(testCtx(t), sandbox.Spec{})
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			t.Cleanup(func() { _ = sess.Close(context.Background()) })
			ctx := testCtx(t)
			p, err := sess.Start(ctx, sandbox.ExecRequest{Cmd: []string{"sleep", "1400"}, TTY: tty})
			if err != nil {
				t.Fatal(err)
			}
			go func() { _, _ = io.Copy(io.Discard, p.Stdout()) }()
			go func() { _, _ = io.Copy(io.Discard, p.Stderr()) }()
			werr := make(chan error, 1)
			go func() {
				_, err := p.Stdin().Write(make([]byte, 64<<20))
				werr <- err
			}()
			select {
			case err := <-werr:
				t.Fatalf("a 64 MiB write to a command that does not read returned: %v", err)
			case <-time.After(time.Second):
			}
			within(t, 5*time.Second, "closing the input", func() { _ = p.Stdin().Close() })
			within(t, eofWait+5*time.Second, "the write", func() {
				if err := <-werr; err == nil {
					t.Error("the write that Close cut short reports no error")
				}
			})
			within(t, 30*time.Second, "Kill", func() {
				if err := p.Kill(ctx); err != nil {
					t.Error(err)
				}
			})
			within(t, 30*time.Second, "Wait", func() {
				if st, err := p.Wait(ctx); err != nil || st.Signal != "SIGKILL" {
					t.Errorf("wait: %+v, %v; want killed by SIGKILL", st, err)
				}
			})
			closeWithin(t, sess, 30*time.Second)
		})
	}
}
