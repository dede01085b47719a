package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox/agentbox/agent"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/trace"
)

// call is one tool call being served.
type call struct {
	s     *Server
	req   *sdk.CallToolRequest
	owner *owner
	tool  string
	args  json.RawMessage
	// box is the session the call acts on, once resolved; the call is
	// recorded in its trace.
	box  *box
	exec *agent.ExecReport
	// rule and approved are the approval rule the call matched and the
	// user's answer, for the trace.
	rule     string
	approved *bool
}

// toolFunc serves a call and returns the text the model reads; an error
// is a tool error the model can act on, never a protocol failure.
type toolFunc func(ctx context.Context, c *call) (string, error)

// add registers a tool whose arguments fn decodes itself.
func (s *Server) add(t *sdk.Tool, fn toolFunc) {
	s.sdk.AddTool(t, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		o, err := s.ownerOf(req.Session)
		if err != nil {
			return errorResult(err), nil
		}
		c := &call{s: s, req: req, owner: o, tool: t.Name, args: req.Params.Arguments}
		if ask, err := c.approval(); err != nil || ask != nil {
			if err != nil {
				s.log.Info("call not approved", "tool", t.Name, "err", err)
				return errorResult(err), nil
			}
			return ask, nil
		}
		start := time.Now()
		out, err := c.run(ctx, fn)
		if c.box != nil {
			e := trace.Event{Type: trace.ToolResult, Tool: t.Name, Bytes: len(out), DurationMS: time.Since(start).Milliseconds()}
			if err != nil {
				e.Err = err.Error()
			}
			if c.exec != nil {
				e.ExitCode, e.TimedOut = c.exec.ExitCode, c.exec.TimedOut
			}
			c.box.emit(e)
		}
		if err != nil {
			s.log.Info("tool error", "tool", t.Name, "err", err)
			return errorResult(err), nil
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: out}}}, nil
	})
}

// run calls fn, turning a panic into an error: a bug in one tool must not
// end every client's sessions.
func (c *call) run(ctx context.Context, fn toolFunc) (out string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s: internal error: %v", c.tool, r)
		}
	}()
	ctx = agent.WithExecReporter(ctx, func(r agent.ExecReport) {
		c.exec = &r
		if c.box != nil {
			c.box.emit(trace.Event{Type: trace.SandboxExec, Tool: c.tool, Cmd: clip(r.Cmd, 2000), ExitCode: r.ExitCode, TimedOut: r.TimedOut, Running: r.Running, DurationMS: r.Duration.Milliseconds()})
		}
	})
	return fn(ctx, c)
}

func errorResult(err error) *sdk.CallToolResult {
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "error: " + err.Error()}}}
}

// decode unmarshals the call's arguments strictly into v, with an error
// the model can act on.
func (c *call) decode(v any) error {
	args := c.args
	if len(bytes.TrimSpace(args)) == 0 || string(bytes.TrimSpace(args)) == "null" {
		args = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return sandbox.Errorf(sandbox.ErrInvalid, "%s: arguments do not fit this tool's schema: %v", c.tool, err)
	}
	return nil
}

// session resolves the session a call names: id, else the client's latest,
// else (orCreate) a new one under the ceiling. The call is then traced
// in that session's trace.
func (c *call) session(ctx context.Context, id string, orCreate bool) (*box, error) {
	b, err := c.owner.get(id)
	if err != nil {
		return nil, err
	}
	if b == nil {
		if !orCreate {
			return nil, sandbox.Errorf(sandbox.ErrNotFound, "you have no sandbox yet; create one with sandbox_create (or just call exec)")
		}
		if b, err = c.s.create(ctx, c.owner, createRequest{}); err != nil {
			return nil, fmt.Errorf("create a sandbox from the operator's default: %w", err)
		}
	}
	c.bind(b)
	return b, nil
}

// bind records the call in b's trace.
func (c *call) bind(b *box) {
	c.box = b
	b.emit(trace.Event{Type: trace.ToolCall, Tool: c.tool, Arguments: clip(string(c.args), 4000)})
	if c.approved != nil {
		b.emit(trace.Event{Type: trace.Approval, Tool: c.tool, Approved: c.approved, Rule: c.rule})
	}
}

// harness calls the harness tool name bound to b with args.
func (c *call) harness(ctx context.Context, b *box, name string, args any) (string, error) {
	raw, err := json.Marshal(args)
	if err != nil {
		return "", err
	}
	t, ok := b.tools[name]
	if !ok {
		return "", fmt.Errorf("%s: the session has no %s tool", c.tool, name)
	}
	out, err := t.Call(ctx, raw)
	if err != nil {
		return "", err
	}
	if t.MaxOutput >= 0 {
		out, _ = agent.Truncate(out, t.MaxOutput)
	}
	return out, nil
}

// clip bounds s for a trace line.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	out, _ := agent.Truncate(s, n)
	return out
}
