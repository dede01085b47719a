package docker

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/agentbox/agentbox/sandbox"
)

// ownerHelperEnv makes the test binary an owner of one session (see
// runOwnerHelper) instead of running tests.
const ownerHelperEnv = "AGENTBOX_DOCKER_TEST_OWNER"

// runOwnerHelper is the test binary started as a session's owner: it
// creates a session (detached when the variable says so), starts a
// command that would run for minutes, prints the container's id and
// waits to be killed.
func runOwnerHelper(mode string) {
	c, err := New(Options{})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	sess, err := c.Create(context.Background(), sandbox.Spec{Detached: mode == "detached"})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	// A command that would outlive its timeout, and its maker.
	p, err := sess.Start(context.Background(), sandbox.ExecRequest{Cmd: []string{"sh", "-c", "sleep 1302 & sleep 1302"}, Timeout: 2 * time.Second})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	go func() { _, _ = io.Copy(io.Discard, p.Stdout()) }()
	cid, _ := ContainerID(sess.State())
	fmt.Println(cid)
	select {}
}

// startOwner runs the test binary as the owner of one session and
// returns it with its container's id.
func startOwner(t *testing.T, mode string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), ownerHelperEnv+"="+mode)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	line = strings.TrimSpace(line)
	if err != nil || line == "" || strings.HasPrefix(line, "error:") {
		t.Fatalf("the owner process: %q, %v", line, err)
	}
	return cmd, line
}

// containerGone waits up to limit for container cid to be removed.
func containerGone(c *Client, cid string, limit time.Duration) bool {
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		_, err := c.api.ContainerInspect(context.Background(), cid, client.ContainerInspectOptions{})
		if cerrdefs.IsNotFound(err) {
			return true
		}
	}
	return false
}

// TestASessionEndsWithTheProcessThatOwnsIt: a process killed with
// SIGKILL (no chance to close anything) takes its session with it,
// command and container, with no gc run; a detached session stays, and
// gc, which removes what dead owners left, spares it, while the timeout
// of the command its dead maker started still holds inside.
func TestASessionEndsWithTheProcessThatOwnsIt(t *testing.T) {
	c := testClient(t)
	t.Parallel()
	t.Run("an owned session goes", func(t *testing.T) {
		t.Parallel()
		owner, cid := startOwner(t, "owned")
		if err := owner.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = owner.Wait()
		if !containerGone(c, cid, 15*time.Second) {
			t.Fatalf("container %s still exists 15s after its owner was killed", shortID(cid))
		}
	})
	t.Run("a detached session stays, and gc spares it", func(t *testing.T) {
		t.Parallel()
		owner, cid := startOwner(t, "detached")
		t.Cleanup(func() { _ = c.removeContainer(context.Background(), cid) })
		if err := owner.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = owner.Wait()
		time.Sleep(2 * time.Second)
		insp, err := c.api.ContainerInspect(testCtx(t), cid, client.ContainerInspectOptions{})
		if err != nil || insp.Container.State == nil || !insp.Container.State.Running {
			t.Fatalf("the detached session's container after its maker's end: %v", err)
		}
		reaped, err := c.GC(testCtx(t), GCOptions{DryRun: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range reaped {
			if strings.HasPrefix(cid, r.Container) {
				t.Fatalf("gc would remove the detached session: %s", r.Reason)
			}
		}
		count := `for p in /proc/[0-9]*; do tr '\0' ' ' <$p/cmdline 2>/dev/null; echo; done | grep -c '^sleep 1302' || true`
		var n string
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
			out, err := exec.Command("docker", "exec", cid, "sh", "-c", count).Output()
			if n = strings.TrimSpace(string(out)); err != nil || n == "0" {
				break
			}
		}
		if n != "0" {
			t.Fatalf("%s sleeps of a 2s command still run in the detached session after its maker was killed", n)
		}
	})
}

// TestACommandStartedWithATimeoutEndsAtIt: a command started (not
// Exec'd: no caller counts its time) with a timeout is killed with its
// tree when it passes, and Wait says it timed out.
func TestACommandStartedWithATimeoutEndsAtIt(t *testing.T) {
	c := testClient(t)
	t.Parallel()
	sess := newSession(t, c, sandbox.Spec{})
	p, err := sess.Start(testCtx(t), sandbox.ExecRequest{Cmd: []string{"sh", "-c", "sleep 1301 & sleep 1301"}, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	_ = p.Stdin().Close()
	go func() { _, _ = io.Copy(io.Discard, p.Stdout()) }()
	go func() { _, _ = io.Copy(io.Discard, p.Stderr()) }()
	start := time.Now()
	st, err := p.Wait(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if !st.TimedOut || time.Since(start) > 10*time.Second {
		t.Fatalf("after %v: %+v; want timed out at 1s", time.Since(start).Round(time.Millisecond), st)
	}
	if len(st.Violations) != 1 || !strings.Contains(st.Violations[0], "exec timeout of 1s") {
		t.Errorf("violations %q", st.Violations)
	}
	noneLeft(t, sess, 1301)
	// A command that ends in time leaves no watchdog behind.
	run(t, sess, "true")
	time.Sleep(2 * time.Second)
	others := `for d in /proc/[0-9]*; do read -r l <$d/stat 2>/dev/null || continue; set -- ${l##*) }; [ "$4" = $$ ] || echo "${d#/proc/} $l"; done`
	if got := strings.TrimSpace(string(run(t, sess, others).Stdout)); strings.Count(got, "\n") != 1 {
		t.Errorf("processes in the container but this command's, after the others ended:\n%s\nwant the init and its child only", got)
	}
}
