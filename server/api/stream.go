package api

import "github.com/agentbox/agentbox/sandbox"

// The exec stream is a WebSocket at GET /v1/sessions/{id}/processes
// (start) or /v1/sessions/{id}/processes/{pid} (reattach).
//
// Client to server: the first text message of a start is an Exec; then
// binary messages are standard input, text messages are Control.
// Server to client: text messages are Event; binary messages are output,
// their first byte the stream (StreamStdout, StreamStderr), the rest data.
// The server closes the connection after the exit event.
//
// Flow control is TCP's: a client that stops reading holds back the
// process's output, and with it the events sent after that output (an
// ack, the exit), as a pipe holds back its writer. A client that sends
// kill must therefore go on reading (and may keep the output for later):
// the killed process's remaining output is finite, and the ack and the
// exit come behind it. sandbox/remote does so.

// Output stream tags, the first byte of a server's binary message.
const (
	StreamStdout byte = 1
	StreamStderr byte = 2
)

// Control is a client's text message after the start.
type Control struct {
	// Type is ControlCloseStdin, ControlResize or ControlKill.
	Type string `json:"type"`
	// Seq, when set, is echoed in the EventAck that answers it.
	Seq  uint64 `json:"seq,omitempty"`
	Rows uint16 `json:"rows,omitempty"`
	Cols uint16 `json:"cols,omitempty"`
}

// Control types.
const (
	ControlCloseStdin = "close_stdin"
	ControlResize     = "resize"
	ControlKill       = "kill"
)

// Event is a server's text message.
type Event struct {
	// Type is EventStarted, EventAck, EventExit or EventError.
	Type string `json:"type"`
	// Process names the process for a reattach (EventStarted).
	Process string `json:"process,omitempty"`
	// Seq is the Control's (EventAck).
	Seq uint64 `json:"seq,omitempty"`
	// Status is how the process ended (EventExit).
	Status *sandbox.ExitStatus `json:"status,omitempty"`
	// Error is what failed (EventError; an EventAck of a failed control).
	Error *ErrorBody `json:"error,omitempty"`
}

// Event types.
const (
	EventStarted = "started"
	EventAck     = "ack"
	EventExit    = "exit"
	EventError   = "error"
)
