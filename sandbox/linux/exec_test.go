package linux

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/sandbox"
)

func TestExecRunsACommandInTheSandbox(t *testing.T) {
	c := newTestClient(t)
	s := newTestSession(t, c, sandbox.Spec{})
	res := run(t, s, "sh", "-c", "echo out; echo err >&2; id; pwd; hostname; exit 3")
	if res.ExitCode != 3 {
		t.Errorf("exit code = %d, want 3 (stderr %q)", res.ExitCode, res.Stderr)
	}
	out := string(res.Stdout)
	for _, want := range []string{"out\n", "uid=1000", "/workspace\n", "agentbox\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout %q lacks %q", out, want)
		}
	}
	if string(res.Stderr) != "err\n" {
		t.Errorf("stderr = %q, want %q", res.Stderr, "err\n")
	}
}

func TestACommandMissingFromThePathIsNotFound(t *testing.T) {
	c := newTestClient(t)
	s := newTestSession(t, c, sandbox.Spec{})
	_, err := sandbox.Exec(context.Background(), s, sandbox.ExecRequest{Cmd: []string{"no-such-command-agentbox"}})
	if !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
}

func TestUserZeroIsARootWithoutCapabilities(t *testing.T) {
	c := newTestClient(t)
	s := newTestSession(t, c, sandbox.Spec{User: "0"})
	res := run(t, s, "sh", "-c", "id -u; grep -E '^Cap(Eff|Prm|Bnd)' /proc/self/status; touch /usr/bin/x 2>&1; cat /proc/1/environ 2>&1 | head -c 40")
	out := string(res.Stdout)
	if !strings.HasPrefix(out, "0\n") {
		t.Errorf("id -u = %q, want 0", out)
	}
	if strings.Count(out, "0000000000000000") != 3 {
		t.Errorf("root in the sandbox holds capabilities:\n%s", out)
	}
	if _, err := os.Stat("/usr/bin/x"); err == nil {
		os.Remove("/usr/bin/x")
		t.Errorf("root in the sandbox wrote the host's /usr/bin")
	}
}

func TestHostNetworkNeedsAllowWeaker(t *testing.T) {
	c := newTestClient(t)
	spec := sandbox.Spec{Policy: sandbox.Policy{Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkHost}}}
	if _, err := c.Create(context.Background(), spec); !errors.Is(err, sandbox.ErrPolicyUnsupported) {
		t.Fatalf("host network without allow-weaker: %v, want ErrPolicyUnsupported", err)
	}
	spec.AllowWeaker = true
	s := newTestSession(t, c, spec)
	res := run(t, s, "sh", "-c", "tail -n +3 /proc/net/dev | wc -l")
	if strings.TrimSpace(string(res.Stdout)) == "1" {
		t.Errorf("host network mode shows only one interface")
	}
}
