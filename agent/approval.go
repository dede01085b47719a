package agent

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
)

// ApprovalRule requires approval for calls of Tool (empty or "*" matches
// every tool) whose subject matches Match (nil matches every call). The
// subject is the command for exec_command (argv joined by spaces), the
// chars for write_stdin, and the raw JSON arguments otherwise.
type ApprovalRule struct {
	Tool  string
	Match *regexp.Regexp
}

// Call is a tool call waiting for approval.
type Call struct {
	Tool      string
	CallID    string
	Arguments string
	// Subject is what the rule matched.
	Subject string
	// Rule is the matching rule, for display ("exec_command ~ rm -rf").
	Rule string
}

// Approver decides whether a call may run. An error ends the run.
type Approver interface {
	Approve(ctx context.Context, call Call) (bool, error)
}

// ApproverFunc adapts a function to Approver.
type ApproverFunc func(ctx context.Context, call Call) (bool, error)

// Approve implements Approver.
func (f ApproverFunc) Approve(ctx context.Context, call Call) (bool, error) { return f(ctx, call) }

func (r ApprovalRule) String() string {
	tool := r.Tool
	if tool == "" {
		tool = "*"
	}
	if r.Match == nil {
		return tool
	}
	return tool + " ~ " + r.Match.String()
}

// callSubject is what approval rules match for a call.
func callSubject(tool, args string) string {
	var v struct {
		Cmd   json.RawMessage `json:"cmd"`
		Chars *string         `json:"chars"`
	}
	if json.Unmarshal([]byte(args), &v) == nil {
		if len(v.Cmd) > 0 {
			var s string
			if json.Unmarshal(v.Cmd, &s) == nil {
				return s
			}
			var argv []string
			if json.Unmarshal(v.Cmd, &argv) == nil {
				return strings.Join(argv, " ")
			}
		}
		if v.Chars != nil {
			return *v.Chars
		}
	}
	return args
}

// matchApproval returns the first rule that requires approval for the call.
func matchApproval(rules []ApprovalRule, tool, args string) (ApprovalRule, string, bool) {
	subject := callSubject(tool, args)
	for _, r := range rules {
		if r.Tool != "" && r.Tool != "*" && r.Tool != tool {
			continue
		}
		if r.Match == nil || r.Match.MatchString(subject) {
			return r, subject, true
		}
	}
	return ApprovalRule{}, subject, false
}

// displaySummary is a short, readable form of a call for progress lines:
// the command, the typed chars, the path, or the files a patch touches.
func displaySummary(tool, args string) string {
	var v struct {
		Path  string `json:"path"`
		Name  string `json:"name"`
		Input string `json:"input"`
	}
	switch {
	case tool == "exec_command" || tool == "write_stdin":
		return callSubject(tool, args)
	case json.Unmarshal([]byte(args), &v) != nil:
		return ""
	case v.Path != "":
		return v.Path
	case v.Name != "":
		return v.Name
	case v.Input != "":
		var files []string
		for _, l := range strings.Split(v.Input, "\n") {
			for _, h := range []string{"*** Add File: ", "*** Update File: ", "*** Delete File: "} {
				if p, ok := strings.CutPrefix(strings.TrimSpace(l), strings.TrimSpace(h)); ok {
					files = append(files, strings.TrimSpace(p))
				}
			}
		}
		return strings.Join(files, " ")
	}
	return ""
}

// MatchApproval returns the first of rules that requires approval for a
// call of tool with the JSON arguments args, and the subject it matched
// (the command, the typed chars, else the arguments): the one matching
// rule for the runner and for callers of the tools outside a run (the
// MCP server).
func MatchApproval(rules []ApprovalRule, tool, args string) (ApprovalRule, string, bool) {
	return matchApproval(rules, tool, args)
}
