package main

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox/docker"
)

// requireDocker skips unless a Docker engine answers.
func requireDocker(t *testing.T) {
	t.Helper()
	c, err := docker.New(docker.Options{})
	testenv.NeedDocker(t, err)
	c.Close()
}

// dockerLeft is what an `agentbox exec --backend docker` of pid left:
// the containers it labelled as its own (still there after up to fifteen
// seconds) and anything in tmp, the TMPDIR it was given.
func dockerLeft(t *testing.T, pid int, tmp string) []string {
	t.Helper()
	var left []string
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		out, err := exec.Command("docker", "ps", "-aq", "--filter", "label=agentbox.owner-pid="+strconv.Itoa(pid)).Output()
		if err != nil {
			t.Fatalf("docker ps: %v", err)
		}
		left = strings.Fields(string(out))
		entries, _ := os.ReadDir(tmp)
		for _, e := range entries {
			left = append(left, tmp+"/"+e.Name())
		}
		if len(left) == 0 {
			break
		}
	}
	return left
}

// An `agentbox exec` on docker killed outright (SIGKILL: no chance to
// close its session) takes its session with it, container and
// workspace, with no gc run.
func TestAKilledDockerExecLeavesNothingBehind(t *testing.T) {
	requireDocker(t)
	bin := agentboxBinary(t)
	tmp := t.TempDir()
	cmd := exec.Command(bin, "exec", "--backend", "docker", "--", "sh", "-c", "echo up; exec sleep 60")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "up\n" {
		_ = cmd.Process.Kill()
		t.Fatalf("waiting for the command to run: %q, %v", line, err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if left := dockerLeft(t, cmd.Process.Pid, tmp); len(left) > 0 {
		t.Errorf("a SIGKILLed docker exec left behind: %v", left)
	}
}

// The reproduction on docker: a reader that stops reading kills
// agentbox with SIGPIPE mid-output; the command, which would sleep on
// past its timeout, and its session go with it.
func TestADockerExecKilledBySIGPIPELeavesNothingBehind(t *testing.T) {
	requireDocker(t)
	bin := agentboxBinary(t)
	tmp := t.TempDir()
	cmd := exec.Command(bin, "exec", "--backend", "docker", "--timeout", "3s", "--", "sh", "-c", "head -c 20000000 /dev/zero; sleep 300")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := out.Read(make([]byte, 1)); err != nil {
		_ = cmd.Process.Kill()
		t.Fatal(err)
	}
	out.Close() // as head -c1 does
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("exec whose reader went away: %v, want it to fail", err)
	}
	if left := dockerLeft(t, cmd.Process.Pid, tmp); len(left) > 0 {
		t.Errorf("a docker exec killed by SIGPIPE (%v) left behind: %v", err, left)
	}
}
