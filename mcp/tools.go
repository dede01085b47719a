package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox/agentbox/agent"
	"github.com/agentbox/agentbox/internal/bytesize"
	"github.com/agentbox/agentbox/manifest"
	"github.com/agentbox/agentbox/sandbox"
)

// sessionIDProp is the session_id argument every session tool takes.
const sessionIDProp = `"session_id": {"type": "string", "description": "The sandbox to act in (from sandbox_create or sandbox_list); default: your latest sandbox, or a new one when you have none."}`

func (s *Server) addTools() {
	s.add(&sdk.Tool{Name: "sandbox_create", Description: "Create a sandbox: a confined environment whose /workspace is empty, or holds what manifest lists. The operator's policy is the ceiling and the default; ask for less (no network, fewer hosts, less memory, a shorter timeout), never more. Returns the session_id.",
		InputSchema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "preset": {"type": "string", "description": "A policy preset the operator defined (` + s.presetNames() + `); the other fields then ask for less than it."},
    "network": {"description": "\"none\", or a list of hosts the operator allows (default: what the operator allows).", "anyOf": [{"type": "string", "enum": ["none"]}, {"type": "array", "items": {"type": "string"}}]},
    "memory": {"type": "string", "description": "Memory limit of the whole sandbox, like \"512M\" (default and maximum: the operator's)."},
    "cpus": {"type": "number", "description": "CPU limit in cores."},
    "pids": {"type": "integer", "description": "Limit on processes and threads."},
    "timeout_seconds": {"type": "integer", "description": "Wall-clock limit of each command."},
    "mounts": {"type": "array", "items": {"type": "string"}, "description": "Names of the operator's read-only host directories to include (default: all it offers)."},
    "manifest": {"type": "object", "description": "What /workspace starts with, instead of empty: {\"entries\": {\"PATH\": {\"file\": {\"content\": \"...\"}} | {\"dir\": {}} | {\"git_repo\": {\"url\": \"https://...\", \"ref\": \"main\"}}}, \"env\": {\"NAME\": \"value\"}}. No host files (ask for the operator's mounts instead) and no grants."}
  },
  "additionalProperties": false
}`)}, s.sandboxCreate)
	s.add(&sdk.Tool{Name: "sandbox_list", Description: "List your sandboxes: id, age, policy.",
		InputSchema: json.RawMessage(`{"type": "object", "properties": {}, "additionalProperties": false}`),
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}}, s.sandboxList)
	s.add(&sdk.Tool{Name: "sandbox_close", Description: "Close a sandbox: its processes end and its workspace is removed.",
		InputSchema: json.RawMessage(`{"type": "object", "properties": {"session_id": {"type": "string"}}, "required": ["session_id"], "additionalProperties": false}`),
		Annotations: &sdk.ToolAnnotations{DestructiveHint: ptr(true)}}, s.sandboxClose)
	s.add(&sdk.Tool{Name: "exec", Description: "Run a command in a sandbox and return its exit code and output (stdout and stderr together; long output keeps its head and tail around a truncation marker). Progress is reported while it runs. A command left running in the background must redirect its output (cmd > log 2>&1 &), or exec waits for it until the timeout. With tty: true it runs on a terminal and, if still running after a second, returns a process_id for write_stdin.",
		InputSchema: json.RawMessage(`{
  "type": "object",
  "properties": {
    ` + sessionIDProp + `,
    "cmd": {"description": "A shell command line (run with sh -lc), or an argv list.", "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}, "minItems": 1}]},
    "workdir": {"type": "string", "description": "Directory to run in, absolute or relative to /workspace."},
    "timeout_seconds": {"type": "integer", "minimum": 1, "description": "Kill the command (and every process it started) after this many seconds; never more than the sandbox's limit."},
    "tty": {"type": "boolean", "description": "Run on a pseudo-terminal, for interactive programs (then use write_stdin)."}
  },
  "required": ["cmd"],
  "additionalProperties": false
}`)}, s.exec)
	s.add(&sdk.Tool{Name: "write_stdin", Description: "Type into a command started by exec with tty: true, and return what it printed since (or its exit status once it ended).",
		InputSchema: json.RawMessage(`{
  "type": "object",
  "properties": {
    ` + sessionIDProp + `,
    "process_id": {"type": "integer", "description": "The process_id exec returned."},
    "chars": {"type": "string", "description": "Characters to send (\n for Enter); empty to only read new output."},
    "wait_ms": {"type": "integer", "minimum": 0, "description": "How long to wait for output, in milliseconds (default 250)."}
  },
  "required": ["process_id"],
  "additionalProperties": false
}`)}, s.writeStdin)
	for _, t := range (&agent.Filesystem{}).Tools(nil) {
		if t.Spec.Name == "view_image" {
			continue // MCP clients read images as resources
		}
		schema, err := withSessionID(t.Spec.Parameters)
		if err != nil {
			panic(fmt.Sprintf("mcp: tool %s: %v", t.Spec.Name, err)) // the harness's constant schemas; a test covers them
		}
		s.add(&sdk.Tool{Name: t.Spec.Name, Description: t.Spec.Description + " Paths are relative to /workspace.", InputSchema: schema}, s.fileTool(t.Spec.Name))
	}
	s.addSnapshotTools()
	s.addPromote()
	s.addResources()
}

func ptr[T any](v T) *T { return &v }

// withSessionID adds the session_id property to a harness tool's schema.
func withSessionID(schema json.RawMessage) (json.RawMessage, error) {
	var m map[string]any
	if err := json.Unmarshal(schema, &m); err != nil {
		return nil, err
	}
	props, _ := m["properties"].(map[string]any)
	if props == nil {
		props = map[string]any{}
	}
	var prop map[string]any
	if err := json.Unmarshal([]byte("{"+sessionIDProp+"}"), &prop); err != nil {
		return nil, err
	}
	props["session_id"] = prop["session_id"]
	m["properties"] = props
	return json.Marshal(m)
}

type createArgs struct {
	Preset         string          `json:"preset"`
	Network        json.RawMessage `json:"network"`
	Memory         string          `json:"memory"`
	CPUs           float64         `json:"cpus"`
	Pids           int64           `json:"pids"`
	TimeoutSeconds int64           `json:"timeout_seconds"`
	Mounts         []string        `json:"mounts"`
	Manifest       json.RawMessage `json:"manifest"`
}

func (a createArgs) request() (createRequest, error) {
	var req createRequest
	p := &req.Policy
	if len(a.Network) > 0 && string(a.Network) != "null" {
		var none string
		var hosts []string
		switch {
		case json.Unmarshal(a.Network, &none) == nil && none == "none":
			p.Network.Mode = sandbox.NetworkNone
		case json.Unmarshal(a.Network, &hosts) == nil && len(hosts) > 0:
			p.Network = sandbox.NetworkPolicy{Mode: sandbox.NetworkAllowList, Allow: hosts}
		default:
			return req, sandbox.Errorf(sandbox.ErrInvalid, `network is "none" or a non-empty list of host names`)
		}
	}
	if a.Memory != "" {
		n, err := bytesize.Parse(a.Memory)
		if err != nil {
			return req, sandbox.Errorf(sandbox.ErrInvalid, "memory: %v", err)
		}
		p.Resources.MemoryBytes = n
	}
	if a.TimeoutSeconds < 0 || a.Pids < 0 || a.CPUs < 0 {
		return req, sandbox.Errorf(sandbox.ErrInvalid, "limits are positive numbers")
	}
	p.Resources.CPUs, p.Resources.Pids = a.CPUs, a.Pids
	p.Resources.ExecTimeout = time.Duration(a.TimeoutSeconds) * time.Second
	req.Mounts, req.Preset = a.Mounts, a.Preset
	if len(a.Manifest) > 0 && string(a.Manifest) != "null" {
		m, err := manifest.ParseJSON(a.Manifest)
		if err != nil {
			return req, err
		}
		req.Manifest = m
	}
	return req, nil
}

func (s *Server) sandboxCreate(ctx context.Context, c *call) (string, error) {
	var a createArgs
	if err := c.decode(&a); err != nil {
		return "", err
	}
	req, err := a.request()
	if err != nil {
		return "", fmt.Errorf("sandbox_create: %w", err)
	}
	b, err := s.create(ctx, c.owner, req)
	if err != nil {
		return "", fmt.Errorf("sandbox_create: %w", err)
	}
	c.bind(b)
	return fmt.Sprintf("session_id: %s\n%s", b.id, b.describe()), nil
}

// describe is what the model is told of a session.
func (b *box) describe() string {
	st := b.sess.State()
	pol := st.Spec.Policy
	r := pol.Resources
	var parts []string
	switch pol.Network.EffectiveMode() {
	case sandbox.NetworkNone:
		parts = append(parts, "network: none")
	case sandbox.NetworkHost:
		parts = append(parts, "network: host")
	default:
		parts = append(parts, "network: "+strings.Join(pol.Network.Allow, ", ")+" (through a proxy; HTTP(S)_PROXY is set)")
	}
	limits := []string{}
	if r.MemoryBytes > 0 {
		limits = append(limits, "memory "+bytesize.Format(r.MemoryBytes))
	}
	if r.CPUs > 0 {
		limits = append(limits, fmt.Sprintf("cpus %g", r.CPUs))
	}
	if r.Pids > 0 {
		limits = append(limits, fmt.Sprintf("%d processes", r.Pids))
	}
	if r.ExecTimeout > 0 {
		limits = append(limits, fmt.Sprintf("%s per command", r.ExecTimeout))
	}
	if len(limits) > 0 {
		parts = append(parts, "limits: "+strings.Join(limits, ", "))
	}
	workdir := st.Spec.Workdir
	if workdir == "" {
		workdir = sandbox.DefaultWorkdir
	}
	parts = append(parts, "workspace: "+workdir)
	if len(b.mounts) > 0 {
		parts = append(parts, "read-only: "+strings.Join(b.mounts, ", "))
	}
	return strings.Join(parts, "\n")
}

func (s *Server) sandboxList(_ context.Context, c *call) (string, error) {
	if err := c.decode(&struct{}{}); err != nil {
		return "", err
	}
	boxes := c.owner.list()
	if len(boxes) == 0 {
		return "no sandboxes; exec creates one, or call sandbox_create", nil
	}
	var b strings.Builder
	for _, x := range boxes {
		fmt.Fprintf(&b, "session_id: %s (created %s ago)\n%s\n\n", x.id, time.Since(x.created).Round(time.Second), indent(x.describe()))
	}
	return strings.TrimRight(b.String(), "\n"), nil
}

func indent(s string) string { return "  " + strings.ReplaceAll(s, "\n", "\n  ") }

func (s *Server) sandboxClose(ctx context.Context, c *call) (string, error) {
	var a struct {
		SessionID string `json:"session_id"`
	}
	if err := c.decode(&a); err != nil {
		return "", err
	}
	if a.SessionID == "" {
		return "", sandbox.Errorf(sandbox.ErrInvalid, "sandbox_close: session_id is required")
	}
	b, err := c.owner.take(a.SessionID)
	if err != nil {
		return "", fmt.Errorf("sandbox_close: %w", err)
	}
	c.bind(b)
	if err := s.closeBox(ctx, b, "closed by the client"); err != nil {
		return "", fmt.Errorf("sandbox_close %s: %w", b.id, err)
	}
	c.box = nil // its trace is closed
	return "closed " + b.id, nil
}

// fileTool serves a harness file tool (read_file, write_file, list_dir,
// apply_patch) in the session the call names.
func (s *Server) fileTool(name string) toolFunc {
	return func(ctx context.Context, c *call) (string, error) {
		var args map[string]json.RawMessage
		if err := c.decode(&args); err != nil {
			return "", err
		}
		var id string
		if raw, ok := args["session_id"]; ok {
			if err := json.Unmarshal(raw, &id); err != nil {
				return "", sandbox.Errorf(sandbox.ErrInvalid, "%s: session_id is a string", name)
			}
			delete(args, "session_id")
		}
		b, err := c.session(ctx, id, name == "write_file" || name == "apply_patch")
		if err != nil {
			return "", fmt.Errorf("%s: %w", name, err)
		}
		return c.harness(ctx, b, name, args)
	}
}
