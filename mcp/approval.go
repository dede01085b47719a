package mcp

import (
	"encoding/json"
	"fmt"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox/agentbox/agent"
)

// approvalKey labels the approval question among a call's input requests.
const approvalKey = "agentbox_approval"

// approval applies the operator's approval rules to a call before it does
// anything: a call no rule matches runs (nil, nil); for one a rule
// matches, the first pass returns the question for the client's user (an
// MCP multi-round-trip input request, which the SDK turns into a legacy
// elicitation for older clients), and the retry carries the answer. A
// declined, cancelled or unanswerable question is an error and nothing
// runs. Approval protects the client's user from the model's actions; the
// client itself answers the question, so it is no defence against the
// client (the ceiling is).
func (c *call) approval() (*sdk.CallToolResult, error) {
	rules := c.s.opts.Approvals
	if len(rules) == 0 {
		return nil, nil
	}
	args := string(c.args)
	if args == "" {
		args = "{}"
	}
	rule, subject, ok := agent.MatchApproval(rules, c.tool, args)
	if !ok {
		return nil, nil
	}
	c.rule = rule.String()
	if ans, ok := c.req.Params.InputResponses[approvalKey]; ok {
		res, isElicit := ans.(*sdk.ElicitResult)
		approved := isElicit && res != nil && res.Action == "accept"
		c.approved = &approved
		if !approved {
			return nil, fmt.Errorf("%s: the user did not approve this call (operator's rule %s); it was not run. Do not retry it; choose another way", c.tool, rule)
		}
		return nil, nil
	}
	if p := c.req.Session.InitializeParams(); p != nil && (p.Capabilities == nil || p.Capabilities.Elicitation == nil) {
		return nil, fmt.Errorf("%s: this call needs the user's approval (operator's rule %s) and this client cannot ask its user (no elicitation); it was not run", c.tool, rule)
	}
	return &sdk.CallToolResult{InputRequests: sdk.InputRequestMap{approvalKey: &sdk.ElicitParams{
		Message:         fmt.Sprintf("agentbox: allow %s %s? (operator's rule %s)", c.tool, clip(subject, 500), rule),
		RequestedSchema: json.RawMessage(`{"type": "object", "properties": {}}`),
	}}}, nil
}
