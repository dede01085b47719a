// Package model is the seam between the agent Runner and a language model:
// a provider-neutral conversation (Items), tool declarations, and the Model
// interface that providers (openai, scripted) implement.
package model

import (
	"context"
	"encoding/json"
)

// ItemType says what an Item is.
type ItemType string

const (
	// ItemMessage is text from the user, the system or the assistant.
	ItemMessage ItemType = "message"
	// ItemFunctionCall is the model asking for a tool call.
	ItemFunctionCall ItemType = "function_call"
	// ItemFunctionCallOutput is a tool's answer to a call.
	ItemFunctionCallOutput ItemType = "function_call_output"
)

// Role is who wrote a message.
type Role string

const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
)

// Item is one entry of a conversation, in the shape of the OpenAI
// Responses API's input and output items.
type Item struct {
	Type ItemType `json:"type"`
	// Role and Text are set for messages.
	Role Role   `json:"role,omitempty"`
	Text string `json:"text,omitempty"`
	// CallID links a function call to its output.
	CallID string `json:"call_id,omitempty"`
	// Name and Arguments (a JSON object, as text) are set for calls.
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"`
	// Output is set for function call outputs.
	Output string `json:"output,omitempty"`
}

// Tool declares a function the model may call.
type Tool struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Parameters is a JSON Schema object describing the arguments.
	Parameters json.RawMessage `json:"parameters"`
}

// Settings tune a request; zero values mean "provider default".
type Settings struct {
	Model           string   `json:"model,omitempty"`
	Temperature     *float64 `json:"temperature,omitempty"`
	TopP            *float64 `json:"top_p,omitempty"`
	MaxOutputTokens int64    `json:"max_output_tokens,omitempty"`
	// ToolChoice is "auto" (default), "required" or "none".
	ToolChoice string `json:"tool_choice,omitempty"`
	// Store asks the provider to retain the request and its response
	// (the Responses API's "store"). Nil means false: agentbox sends
	// store=false on every Responses request unless this says true, since
	// a run's conversation holds the client data its tools read. Chat
	// Completions requests carry it only when it is set.
	Store *bool `json:"store,omitempty"`
}

// Stores reports whether s asks the provider to retain the conversation.
func (s Settings) Stores() bool { return s.Store != nil && *s.Store }

// Request is one model turn's input.
type Request struct {
	// Instructions is the system prompt.
	Instructions string `json:"instructions"`
	// Input is the conversation so far.
	Input    []Item   `json:"input"`
	Tools    []Tool   `json:"tools,omitempty"`
	Settings Settings `json:"settings"`
}

// Usage counts tokens.
type Usage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	TotalTokens  int64 `json:"total_tokens"`
}

// Add accumulates u2 into u.
func (u *Usage) Add(u2 Usage) {
	u.InputTokens += u2.InputTokens
	u.OutputTokens += u2.OutputTokens
	u.TotalTokens += u2.TotalTokens
}

// Response is one model turn's output: assistant messages and/or function
// calls. A response with no function call is a final answer.
type Response struct {
	ID     string `json:"id,omitempty"`
	Model  string `json:"model,omitempty"`
	Output []Item `json:"output"`
	Usage  Usage  `json:"usage"`
}

// Calls returns the function calls in r, in order.
func (r *Response) Calls() []Item {
	var calls []Item
	for _, it := range r.Output {
		if it.Type == ItemFunctionCall {
			calls = append(calls, it)
		}
	}
	return calls
}

// Text joins the assistant message texts in r.
func (r *Response) Text() string {
	var s string
	for _, it := range r.Output {
		if it.Type == ItemMessage && it.Role == RoleAssistant {
			if s != "" {
				s += "\n"
			}
			s += it.Text
		}
	}
	return s
}

// Model is a language model provider.
type Model interface {
	// Name describes the provider and model ("openai-responses:gpt-4.1").
	Name() string
	// Respond runs one turn.
	Respond(ctx context.Context, req Request) (*Response, error)
}

// Event is a streaming delta, for live progress.
type Event struct {
	// Type is "text_delta", "call_started" or "call_arguments_delta".
	Type  string `json:"type"`
	Delta string `json:"delta,omitempty"`
	Name  string `json:"name,omitempty"`
}

// Streamer is implemented by models that can stream a turn; Respond still
// returns the whole response at the end.
type Streamer interface {
	RespondStream(ctx context.Context, req Request, onEvent func(Event)) (*Response, error)
}

// Error is a provider failure with what a caller needs to decide: the
// server that failed, its HTTP status, and whether to retry.
type Error struct {
	Provider   string
	BaseURL    string
	StatusCode int
	Retryable  bool
	Err        error
}

func (e *Error) Error() string {
	msg := e.Provider + " model at " + e.BaseURL
	if e.StatusCode != 0 {
		msg += ": HTTP " + itoa(e.StatusCode)
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
