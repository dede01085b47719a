package agent

import "time"

// EventType names a step of a run, for live progress.
type EventType string

const (
	// EventSession: the session is ready (created, resumed or injected).
	EventSession EventType = "session"
	// EventTurn: a model turn starts.
	EventTurn EventType = "turn"
	// EventTextDelta: a piece of the model's text as it streams (Text);
	// sent when the model streams (model.Streamer) and OnEvent is set.
	EventTextDelta EventType = "text_delta"
	// EventToolCall: a tool call starts.
	EventToolCall EventType = "tool_call"
	// EventToolResult: a tool call finished.
	EventToolResult EventType = "tool_result"
	// EventApproval: an approval was decided.
	EventApproval EventType = "approval"
	// EventFinal: the model gave its final answer.
	EventFinal EventType = "final"
	// EventError: the run failed.
	EventError EventType = "error"
)

// Event is one step of a run, reported through RunConfig.OnEvent.
type Event struct {
	Type EventType
	Turn int
	// Tool and Summary (a short form of the arguments, such as the
	// command) describe tool calls.
	Tool    string
	Summary string
	// ExitCode is set for tool results that ran a command.
	ExitCode *int
	// TimedOut is set when that command was killed for its timeout.
	TimedOut bool
	// Duration is the tool call's (or turn's) wall time.
	Duration time.Duration
	// Approved is set for approval events.
	Approved bool
	// Denied is set for the result of a call that was not approved.
	Denied bool
	// Interrupted is set, in a resumed run, for the result of a call that
	// had begun when the run stopped and was not run again.
	Interrupted bool
	// Err describes a failed tool call or run.
	Err string
	// Text is the final output, a streamed piece of text, or a session
	// description.
	Text string
}
