package openai_test

import (
	"context"
	"testing"

	"github.com/agentbox/agentbox/agent/model"
	"github.com/agentbox/agentbox/agent/model/openai"
)

func chatBody(id string, message map[string]any, finish string, in, out int) map[string]any {
	return map[string]any{
		"id": id, "object": "chat.completion", "created": 1, "model": "llama-test",
		"choices": []any{map[string]any{"index": 0, "finish_reason": finish, "logprobs": nil, "message": message}},
		"usage":   map[string]any{"prompt_tokens": in, "completion_tokens": out, "total_tokens": in + out},
	}
}

func chunk(delta map[string]any) map[string]any {
	return map[string]any{"id": "chunk_1", "object": "chat.completion.chunk", "created": 1, "model": "llama-test",
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": nil}}}
}

func TestChatFunctionCallRoundTrip(t *testing.T) {
	srv := newFakeServer(t,
		reply{body: jsonOf(t, chatBody("cc_1", map[string]any{"role": "assistant", "content": "Let me look.", "refusal": nil,
			"tool_calls": []any{
				map[string]any{"id": "call_a", "type": "function", "function": map[string]any{"name": "exec_command", "arguments": `{"cmd":"ls"}`}},
				map[string]any{"id": "call_b", "type": "function", "function": map[string]any{"name": "exec_command", "arguments": `{"cmd":"pwd"}`}},
			}}, "tool_calls", 40, 12))},
		reply{body: jsonOf(t, chatBody("cc_2", map[string]any{"role": "assistant", "content": "All done.", "refusal": nil}, "stop", 80, 3))},
	)
	m := newModel(t, openai.Config{API: "chat", BaseURL: srv.URL(), Model: "llama-test"})
	ctx := context.Background()
	req := model.Request{
		Instructions: "Be brief.",
		Input:        []model.Item{{Type: model.ItemMessage, Role: model.RoleUser, Text: "Where am I?"}},
		Tools:        []model.Tool{execTool},
		Settings:     model.Settings{MaxOutputTokens: 64, ToolChoice: "required"},
	}
	r1, err := m.Respond(ctx, req)
	if err != nil {
		t.Fatalf("first turn: %v", err)
	}
	if r1.Text() != "Let me look." || len(r1.Calls()) != 2 || r1.Calls()[1].CallID != "call_b" || r1.Calls()[1].Arguments != `{"cmd":"pwd"}` {
		t.Fatalf("first turn = %+v", r1.Output)
	}
	if r1.Usage != (model.Usage{InputTokens: 40, OutputTokens: 12, TotalTokens: 52}) {
		t.Errorf("usage = %+v", r1.Usage)
	}
	req.Input = append(req.Input, r1.Output...)
	req.Input = append(req.Input,
		model.Item{Type: model.ItemFunctionCallOutput, CallID: "call_a", Output: "a.txt"},
		model.Item{Type: model.ItemFunctionCallOutput, CallID: "call_b", Output: "/workspace"})
	r2, err := m.Respond(ctx, req)
	if err != nil {
		t.Fatalf("second turn: %v", err)
	}
	if r2.Text() != "All done." || len(r2.Calls()) != 0 {
		t.Errorf("second turn = %+v", r2.Output)
	}

	reqs := srv.requests()
	first, second := reqs[0].Body, reqs[1].Body
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"the request goes to /v1/chat/completions", reqs[0].Path, "/v1/chat/completions"},
		{"the instructions become a system message", dig(first, "messages", 0, "role"), "system"},
		{"the system message carries the instructions", dig(first, "messages", 0, "content"), "Be brief."},
		{"the user message follows", dig(first, "messages", 1, "content"), "Where am I?"},
		{"the tool is declared as a function", dig(first, "tools", 0, "function", "name"), "exec_command"},
		{"the tool choice is sent", first["tool_choice"], "required"},
		{"max output tokens become max_completion_tokens", first["max_completion_tokens"], 64.0},
		{"the assistant text and calls form one message", dig(second, "messages", 2, "role"), "assistant"},
		{"that message keeps the text", dig(second, "messages", 2, "content"), "Let me look."},
		{"that message carries both calls", dig(second, "messages", 2, "tool_calls", 1, "id"), "call_b"},
		{"the call arguments are sent back", dig(second, "messages", 2, "tool_calls", 0, "function", "arguments"), `{"cmd":"ls"}`},
		{"each output becomes a tool message", dig(second, "messages", 3, "role"), "tool"},
		{"the tool message names its call", dig(second, "messages", 4, "tool_call_id"), "call_b"},
		{"the tool message carries the output", dig(second, "messages", 4, "content"), "/workspace"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %#v, want %#v", tt.name, tt.got, tt.want)
		}
	}
	if m.Name() != "openai-chat:llama-test" {
		t.Errorf("Name() = %q", m.Name())
	}
}

func TestChatStreamingAssemblesToolCallsFromDeltas(t *testing.T) {
	usage := chunk(nil)
	usage["choices"] = []any{}
	usage["usage"] = map[string]any{"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13}
	events := []string{
		jsonOf(t, chunk(map[string]any{"role": "assistant", "content": "Run"})),
		jsonOf(t, chunk(map[string]any{"content": "ning"})),
		jsonOf(t, chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": "call_z", "type": "function", "function": map[string]any{"name": "exec_command", "arguments": ""}}}})),
		jsonOf(t, chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": `{"cmd":`}}}})),
		jsonOf(t, chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": `"date"}`}}}})),
		jsonOf(t, usage),
	}
	srv := newFakeServer(t, reply{events: events, doneMsg: true})
	m := newModel(t, openai.Config{API: "chat", BaseURL: srv.URL()})
	var got []model.Event
	r, err := m.RespondStream(context.Background(), model.Request{Input: []model.Item{{Type: model.ItemMessage, Text: "time?"}}}, func(e model.Event) { got = append(got, e) })
	if err != nil {
		t.Fatalf("RespondStream: %v", err)
	}
	want := []model.Event{
		{Type: "text_delta", Delta: "Run"}, {Type: "text_delta", Delta: "ning"},
		{Type: "call_started", Name: "exec_command"},
		{Type: "call_arguments_delta", Delta: `{"cmd":`}, {Type: "call_arguments_delta", Delta: `"date"}`},
	}
	if len(got) != len(want) {
		t.Fatalf("events = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	calls := r.Calls()
	if r.Text() != "Running" || len(calls) != 1 || calls[0].CallID != "call_z" || calls[0].Arguments != `{"cmd":"date"}` {
		t.Errorf("response = %+v", r.Output)
	}
	if r.Usage.TotalTokens != 13 {
		t.Errorf("usage = %+v", r.Usage)
	}
	if b := srv.requests()[0].Body; dig(b, "stream_options", "include_usage") != true {
		t.Errorf("stream did not ask for usage: %v", b["stream_options"])
	}
}
