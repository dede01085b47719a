// Package trace records an agent run as JSONL: one JSON object per line,
// each flushed as it is written so that a crash leaves the trace complete
// up to the failure. Every text field passes a Redactor (secret patterns
// and the literal credentials a run holds) and is bounded by MaxField
// before it is written or exported. When an OTLP endpoint is configured the same events
// are exported as OpenTelemetry spans (run -> turn -> tool call).
package trace

import (
	"time"

	"github.com/agentbox/agentbox/agent/model"
)

// Type names a trace event.
type Type string

// The event types, in the order a run usually emits them.
const (
	RunStart      Type = "run_start"
	ModelRequest  Type = "model_request"
	ModelResponse Type = "model_response"
	ToolCall      Type = "tool_call"
	SandboxExec   Type = "sandbox_exec"
	Approval      Type = "approval"
	ToolResult    Type = "tool_result"
	Promotion     Type = "promotion"
	Error         Type = "error"
	FinalOutput   Type = "final_output"
	RunEnd        Type = "run_end"
)

// Event is one line of a trace. Only the fields of its Type are set.
type Event struct {
	Time    time.Time `json:"time"`
	RunID   string    `json:"run_id"`
	TraceID string    `json:"trace_id"`
	Seq     int64     `json:"seq"`
	Type    Type      `json:"type"`
	// Turn is the model turn the event belongs to (1-based; 0 outside).
	Turn int `json:"turn,omitempty"`

	// run_start
	Agent   string `json:"agent,omitempty"`
	Model   string `json:"model,omitempty"`
	Input   string `json:"input,omitempty"`
	Session string `json:"session,omitempty"`

	// model_request: what was asked of the model. Instructions are
	// recorded whole on the first request and whenever they change; every
	// request carries their hash.
	Items              int             `json:"items,omitempty"`
	Tools              []string        `json:"tools,omitempty"`
	InstructionBytes   int             `json:"instruction_bytes,omitempty"`
	InstructionsSHA256 string          `json:"instructions_sha256,omitempty"`
	Instructions       string          `json:"instructions,omitempty"`
	Settings           *model.Settings `json:"settings,omitempty"`

	// model_response (Model is the model that answered)
	ResponseID string       `json:"response_id,omitempty"`
	Text       string       `json:"text,omitempty"`
	Calls      []string     `json:"calls,omitempty"`
	Usage      *model.Usage `json:"usage,omitempty"`

	// tool_call (Arguments: the model's input to the tool), tool_result
	// (Output: what the model read back, Bytes its length, Truncated when
	// the tool cut it), approval
	Tool      string `json:"tool,omitempty"`
	CallID    string `json:"call_id,omitempty"`
	Arguments string `json:"arguments,omitempty"`
	Bytes     int    `json:"bytes,omitempty"`
	Truncated bool   `json:"truncated,omitempty"`
	Approved  *bool  `json:"approved,omitempty"`
	// Interrupted marks the tool_result a resumed run gives a call that
	// had begun when the run stopped: it was not run again, and Output
	// tells the model so.
	Interrupted bool   `json:"interrupted,omitempty"`
	Rule        string `json:"rule,omitempty"`

	// sandbox_exec; Violations are the policy violations the backend saw
	// (a denied egress host, a limit reached), one line each
	Cmd        string   `json:"cmd,omitempty"`
	ExitCode   *int     `json:"exit_code,omitempty"`
	TimedOut   bool     `json:"timed_out,omitempty"`
	Running    bool     `json:"running,omitempty"`
	Violations []string `json:"violations,omitempty"`

	// promotion: where the outputs went and each file's hash, or the
	// rules they broke (then nothing was promoted)
	Dest     string         `json:"dest,omitempty"`
	Files    []PromotedFile `json:"files,omitempty"`
	Rejected []string       `json:"rejected,omitempty"`

	// error (and failed tool results), final_output, tool_result
	Err    string `json:"error,omitempty"`
	Output string `json:"output,omitempty"`

	// DurationMS is the step's wall time: model response, tool result,
	// sandbox exec, run end.
	DurationMS int64 `json:"duration_ms,omitempty"`
	// Turns is set on run_end.
	Turns int `json:"turns,omitempty"`
}

// PromotedFile is one output that left the sandbox.
type PromotedFile struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}
