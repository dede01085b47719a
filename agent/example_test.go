package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"time"

	"github.com/agentbox/agentbox/agent"
	"github.com/agentbox/agentbox/agent/model"
	"github.com/agentbox/agentbox/sandbox"
)

// A run with the default capabilities plus one plain function tool, in a
// fresh session of whatever backend client is; calls to rm need approval.
func ExampleRunner_Run() {
	var client sandbox.Client // linux.New(...), docker.New(...), local.New(...)
	var llm model.Model       // openai.New(...), scripted.Load(...)

	clock := agent.FunctionTool("utc_now", "The current UTC time.", nil,
		func(context.Context, json.RawMessage) (string, error) {
			return time.Now().UTC().Format(time.RFC3339), nil
		})
	a := &agent.SandboxAgent{
		Name:         "janitor",
		Instructions: "Tidy the workspace and say what you removed.",
		Capabilities: append(agent.DefaultCapabilities(), agent.Functions{List: []agent.Tool{clock}}),
		Model:        llm,
	}
	res, err := (&agent.Runner{}).Run(context.Background(), a, "clean up build leftovers", agent.RunConfig{
		Sandbox:   agent.SandboxConfig{Client: client, Spec: sandbox.Spec{Policy: sandbox.Policy{}}},
		Approvals: []agent.ApprovalRule{{Tool: "exec_command", Match: regexp.MustCompile(`\brm\b`)}},
		Approver: agent.ApproverFunc(func(_ context.Context, c agent.Call) (bool, error) {
			return c.Subject == "rm -rf build", nil
		}),
		OnEvent: func(e agent.Event) {
			if e.Type == agent.EventToolResult {
				fmt.Println("turn", e.Turn, e.Tool, e.Summary)
			}
		},
	})
	if err != nil {
		fmt.Println("run failed:", err)
		return
	}
	fmt.Println(res.FinalOutput)
}
