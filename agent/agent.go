package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentbox/agentbox/agent/model"
	"github.com/agentbox/agentbox/manifest"
	"github.com/agentbox/agentbox/sandbox"
)

// DefaultMaxTurns bounds a run when neither the agent nor the RunConfig
// sets a turn limit.
const DefaultMaxTurns = 20

// SandboxAgent is an agent whose actions run in a sandbox session.
type SandboxAgent struct {
	// Name identifies the agent in traces and logs.
	Name string
	// Instructions are the agent's own instructions, placed after the
	// sandbox prompt.
	Instructions string
	// BaseInstructions, when set, replace the built-in sandbox prompt.
	BaseInstructions string
	// Manifest is the default workspace contract (files, mounts, env);
	// RunConfig.Manifest overrides it.
	Manifest *manifest.Manifest
	// Capabilities attach tools to the session; nil means
	// DefaultCapabilities().
	Capabilities []Capability
	// Model answers each turn.
	Model model.Model
	// Settings tune every model request.
	Settings model.Settings
	// MaxTurns bounds the number of model turns (default DefaultMaxTurns).
	MaxTurns int
	// RunAs is "uid[:gid]" to run commands as; empty means the manifest's
	// user, else the backend default.
	RunAs string
}

// Capability adds an instruction fragment and tools bound to the live
// session. Custom capabilities implement it directly.
type Capability interface {
	// Name is a short identifier ("shell", "filesystem").
	Name() string
	// Instructions is the fragment appended to the system prompt; empty
	// adds nothing.
	Instructions() string
	// Tools returns the tools bound to sess. It is called once per run.
	Tools(sess sandbox.Session) []Tool
}

// InputFilter is implemented by capabilities that rewrite the
// conversation before each model request (Compaction does).
type InputFilter interface {
	FilterInput(items []model.Item) []model.Item
}

// SessionCloser is implemented by capabilities that hold resources tied
// to the session their tools were bound to (Shell's running processes);
// the runner calls CloseSession when the run ends, before the session is
// persisted and closed.
type SessionCloser interface {
	CloseSession(ctx context.Context, sess sandbox.Session) error
}

// Starter is implemented by capabilities that set up before their tools
// are listed (MCPServers connects to its servers); the runner calls Start
// once per run, and SessionCloser's CloseSession undoes it.
type Starter interface {
	Start(ctx context.Context) error
}

// Tool is a function the model may call, bound to a session.
type Tool struct {
	// Spec is what the model sees: name, description, JSON Schema.
	Spec model.Tool
	// Call runs the tool with the model's JSON arguments and returns the
	// text the model reads. An error is reported to the model as the
	// tool's output (it can recover); it does not end the run.
	Call func(ctx context.Context, args json.RawMessage) (string, error)
	// MaxOutput caps the output in bytes; zero means DefaultToolOutputBytes.
	MaxOutput int
}

// FunctionTool builds a plain function tool. schema is a JSON Schema
// object for the arguments; an empty schema accepts any object.
func FunctionTool(name, description string, schema json.RawMessage, fn func(ctx context.Context, args json.RawMessage) (string, error)) Tool {
	if len(schema) == 0 {
		schema = json.RawMessage(`{"type":"object","properties":{}}`)
	}
	return Tool{Spec: model.Tool{Name: name, Description: description, Parameters: schema}, Call: fn}
}

// Functions is a capability made of plain function tools, for custom tools
// that need no session.
type Functions struct {
	// Label is the capability's name; default "functions".
	Label string
	// Fragment is an optional instruction fragment.
	Fragment string
	List     []Tool
}

// Name implements Capability.
func (f Functions) Name() string {
	if f.Label == "" {
		return "functions"
	}
	return f.Label
}

// Instructions implements Capability.
func (f Functions) Instructions() string { return f.Fragment }

// Tools implements Capability.
func (f Functions) Tools(sandbox.Session) []Tool { return f.List }

// DefaultCapabilities is the set used when an agent names none:
// Filesystem, Shell and Compaction, with default options.
func DefaultCapabilities() []Capability {
	return []Capability{&Filesystem{}, &Shell{}, &Compaction{}}
}

// decodeArgs unmarshals a tool's JSON arguments strictly, with an error the
// model can act on.
func decodeArgs(tool string, args json.RawMessage, v any) error {
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: arguments are not valid for this tool: %v", tool, err)
	}
	return nil
}
