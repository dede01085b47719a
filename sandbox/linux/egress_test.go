package linux

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
)

func TestAllowListRefusesUnlistedHostsThroughTheProxy(t *testing.T) {
	c := newTestClient(t)
	if !hasPart(c, sandbox.PartNetworkAllowList) {
		testenv.Skipf(t, "no egress proxy")
	}
	if _, err := exec.LookPath("curl"); err != nil {
		testenv.Skipf(t, "curl is not installed")
	}
	s := newTestSession(t, c, sandbox.Spec{Policy: sandbox.Policy{Network: sandbox.NetworkPolicy{
		Mode: sandbox.NetworkAllowList, Allow: []string{"allowed.example.com"},
	}}})
	res, err := sandbox.Exec(context.Background(), s, sandbox.ExecRequest{
		Cmd:     []string{"curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "http://denied.example.org/"},
		Timeout: 20 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if code := string(res.Stdout); code != "403" {
		t.Errorf("status through the proxy = %q, want 403 (stderr %q)", code, res.Stderr)
	}
	if !strings.Contains(strings.Join(res.Violations, "\n"), "denied.example.org") {
		t.Errorf("violations %q do not name the refused host", res.Violations)
	}
	// Without the proxy there is no route at all.
	res, err = sandbox.Exec(context.Background(), s, sandbox.ExecRequest{
		Cmd:     []string{"curl", "-sS", "--noproxy", "*", "--max-time", "3", "http://1.1.1.1/"},
		Timeout: 20 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == 0 {
		t.Errorf("a direct connection bypassing the proxy succeeded")
	}
}
