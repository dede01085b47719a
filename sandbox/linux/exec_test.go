package linux

import (
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
