package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/trace"
)

// The credentials the egress proxy injects never enter the sandbox, but a
// model can still be handed one (a user pastes it in the task) and a
// command can print it: the trace holds neither.
func TestTraceNeverHoldsTheRunsCredentials(t *testing.T) {
	const token = "tok-4f9c2e7a1b"
	var buf bytes.Buffer
	tw := trace.New(&buf)
	m := plan("done", call("exec_command", map[string]any{"cmd": "echo 'Authorization: Bearer " + token + "'; echo " + token}))
	spec := sandbox.Spec{Policy: sandbox.Policy{Network: sandbox.NetworkPolicy{
		Mode: sandbox.NetworkAllowList, Allow: []string{"api.example.com"},
		Credentials: map[string]map[string]string{"api.example.com": {"Authorization": "Bearer " + token}},
	}}}
	_, err := (&Runner{}).Run(context.Background(), &SandboxAgent{Name: "t", Model: m}, "use "+token, RunConfig{Sandbox: SandboxConfig{Client: newClient(t), Spec: spec}, Trace: tw})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), token) {
		t.Fatalf("the credential reached the trace:\n%s", buf.String())
	}
	out := outputs(m.requests()[1])[0]
	if !strings.Contains(out, token) {
		t.Errorf("the model should still read the command's real output, got %q", out)
	}
	var sawResult bool
	for _, e := range readTrace(t, &buf) {
		if e.Type == trace.ToolResult {
			sawResult = true
			if !strings.Contains(e.Output, trace.Redacted) {
				t.Errorf("tool_result output %q does not show where the credential was", e.Output)
			}
		}
	}
	if !sawResult {
		t.Error("no tool_result in the trace")
	}
}

// A tool's report of the violations its command met reaches the trace, so
// that an auditor sees why a command failed, not only that it did.
func TestTraceRecordsTheViolationsACommandMet(t *testing.T) {
	const line = "egress refused: CONNECT \"example.com:443\": host example.com is not in the allow-list"
	fetch := FunctionTool("fetch", "fetch a URL", nil, func(ctx context.Context, _ json.RawMessage) (string, error) {
		code := 56
		ReportExec(ctx, ExecReport{Cmd: "curl https://example.com", ExitCode: &code, Violations: []string{line}})
		return "curl: (56) CONNECT tunnel failed, response 403", nil
	})
	var buf bytes.Buffer
	m := plan("done", call("fetch", `{}`))
	a := &SandboxAgent{Name: "t", Model: m, Capabilities: []Capability{Functions{List: []Tool{fetch}}}}
	if _, err := (&Runner{}).Run(context.Background(), a, "go", RunConfig{Sandbox: SandboxConfig{Client: newClient(t)}, Trace: trace.New(&buf)}); err != nil {
		t.Fatal(err)
	}
	for _, e := range readTrace(t, &buf) {
		if e.Type == trace.SandboxExec {
			if len(e.Violations) != 1 || e.Violations[0] != line {
				t.Fatalf("sandbox_exec violations = %q, want [%q]", e.Violations, line)
			}
			return
		}
	}
	t.Fatal("no sandbox_exec event")
}
