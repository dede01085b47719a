package openai_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/agentbox/agentbox/agent/model"
	"github.com/agentbox/agentbox/agent/model/openai"
)

var execTool = model.Tool{
	Name:        "exec_command",
	Description: "Run a shell command in the sandbox.",
	Parameters:  json.RawMessage(`{"type":"object","properties":{"cmd":{"type":"string"}},"required":["cmd"]}`),
}

func responsesBody(id string, output []map[string]any, in, out int) map[string]any {
	return map[string]any{
		"id": id, "object": "response", "created_at": 1, "status": "completed", "model": "gpt-test",
		"output": output, "parallel_tool_calls": true, "tool_choice": "auto", "tools": []any{},
		"usage": map[string]any{"input_tokens": in, "output_tokens": out, "total_tokens": in + out,
			"input_tokens_details": map[string]any{"cached_tokens": 0}, "output_tokens_details": map[string]any{"reasoning_tokens": 0}},
	}
}

func callItem(callID, args string) map[string]any {
	return map[string]any{"type": "function_call", "id": "fc_" + callID, "call_id": callID, "name": "exec_command", "arguments": args, "status": "completed"}
}

func textItem(text string) map[string]any {
	return map[string]any{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
		"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}}
}

func newModel(t *testing.T, cfg openai.Config) *openai.Model {
	t.Helper()
	if cfg.APIKey == "" {
		cfg.APIKey = "sk-test"
	}
	if cfg.Model == "" {
		cfg.Model = "gpt-test"
	}
	m, err := openai.New(cfg)
	if err != nil {
		t.Fatalf("openai.New: %v", err)
	}
	return m
}

func TestResponsesFunctionCallRoundTrip(t *testing.T) {
	srv := newFakeServer(t,
		reply{body: jsonOf(t, responsesBody("resp_1", []map[string]any{callItem("call_1", `{"cmd":"ls statements"}`)}, 100, 20))},
		reply{body: jsonOf(t, responsesBody("resp_2", []map[string]any{textItem("Three statements found.")}, 150, 8))},
	)
	m := newModel(t, openai.Config{BaseURL: srv.URL()})
	ctx := context.Background()
	temp := 0.2
	req := model.Request{
		Instructions: "You are an auditor.",
		Input:        []model.Item{{Type: model.ItemMessage, Role: model.RoleUser, Text: "List the statements."}},
		Tools:        []model.Tool{execTool},
		Settings:     model.Settings{Temperature: &temp, MaxOutputTokens: 500, ToolChoice: "auto"},
	}
	r1, err := m.Respond(ctx, req)
	if err != nil {
		t.Fatalf("first turn: %v", err)
	}
	calls := r1.Calls()
	if len(calls) != 1 || calls[0].Name != "exec_command" || calls[0].CallID != "call_1" || calls[0].Arguments != `{"cmd":"ls statements"}` {
		t.Fatalf("first turn calls = %+v", calls)
	}
	if r1.Usage != (model.Usage{InputTokens: 100, OutputTokens: 20, TotalTokens: 120}) {
		t.Errorf("first turn usage = %+v", r1.Usage)
	}
	req.Input = append(req.Input, calls[0], model.Item{Type: model.ItemFunctionCallOutput, CallID: "call_1", Output: "bank.csv\nledger.csv\ninvoices.csv\n"})
	r2, err := m.Respond(ctx, req)
	if err != nil {
		t.Fatalf("second turn: %v", err)
	}
	if got := r2.Text(); got != "Three statements found." || len(r2.Calls()) != 0 {
		t.Errorf("second turn text = %q, calls = %v", got, r2.Calls())
	}
	if r2.ID != "resp_2" || r2.Model != "gpt-test" || r2.Usage.TotalTokens != 158 {
		t.Errorf("second turn id/model/usage = %q %q %+v", r2.ID, r2.Model, r2.Usage)
	}

	reqs := srv.requests()
	if len(reqs) != 2 {
		t.Fatalf("server saw %d requests, want 2", len(reqs))
	}
	first, second := reqs[0], reqs[1]
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"the request goes to /v1/responses", first.Path, "/v1/responses"},
		{"the API key is sent as a bearer token", first.Auth, "Bearer sk-test"},
		{"the model name is sent", first.Body["model"], "gpt-test"},
		{"the instructions are sent", first.Body["instructions"], "You are an auditor."},
		{"the temperature is sent", first.Body["temperature"], 0.2},
		{"max output tokens are sent", first.Body["max_output_tokens"], 500.0},
		{"the tool choice is sent", first.Body["tool_choice"], "auto"},
		{"the tool is declared as a function", dig(first.Body, "tools", 0, "type"), "function"},
		{"the tool has its name", dig(first.Body, "tools", 0, "name"), "exec_command"},
		{"the tool has its schema", dig(first.Body, "tools", 0, "parameters", "required", 0), "cmd"},
		{"the user message is the first input item", dig(first.Body, "input", 0, "content"), "List the statements."},
		{"the call is echoed back as a function_call item", dig(second.Body, "input", 1, "type"), "function_call"},
		{"the echoed call keeps its call id", dig(second.Body, "input", 1, "call_id"), "call_1"},
		{"the tool output is a function_call_output item", dig(second.Body, "input", 2, "type"), "function_call_output"},
		{"the tool output names its call", dig(second.Body, "input", 2, "call_id"), "call_1"},
		{"the tool output carries the text", dig(second.Body, "input", 2, "output"), "bank.csv\nledger.csv\ninvoices.csv\n"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %#v, want %#v", tt.name, tt.got, tt.want)
		}
	}
	if m.Name() != "openai-responses:gpt-test" {
		t.Errorf("Name() = %q", m.Name())
	}
}

func TestResponsesStreamingDeliversEventsAndTheWholeResponse(t *testing.T) {
	final := responsesBody("resp_s", []map[string]any{textItem("Hello"), callItem("call_9", `{"cmd":"pwd"}`)}, 7, 3)
	inProgress := responsesBody("resp_s", []map[string]any{}, 0, 0)
	inProgress["status"] = "in_progress"
	events := []string{
		jsonOf(t, map[string]any{"type": "response.created", "sequence_number": 0, "response": inProgress}),
		jsonOf(t, map[string]any{"type": "response.output_text.delta", "sequence_number": 1, "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": "Hel", "logprobs": []any{}}),
		jsonOf(t, map[string]any{"type": "response.output_text.delta", "sequence_number": 2, "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": "lo", "logprobs": []any{}}),
		jsonOf(t, map[string]any{"type": "response.output_item.added", "sequence_number": 3, "output_index": 1, "item": callItem("call_9", "")}),
		jsonOf(t, map[string]any{"type": "response.function_call_arguments.delta", "sequence_number": 4, "item_id": "fc_call_9", "output_index": 1, "delta": `{"cmd":`}),
		jsonOf(t, map[string]any{"type": "response.function_call_arguments.delta", "sequence_number": 5, "item_id": "fc_call_9", "output_index": 1, "delta": `"pwd"}`}),
		jsonOf(t, map[string]any{"type": "response.completed", "sequence_number": 6, "response": final}),
	}
	srv := newFakeServer(t, reply{events: events, typed: true})
	m := newModel(t, openai.Config{BaseURL: srv.URL()})
	var got []model.Event
	r, err := m.RespondStream(context.Background(), model.Request{Input: []model.Item{{Type: model.ItemMessage, Role: model.RoleUser, Text: "hi"}}}, func(e model.Event) { got = append(got, e) })
	if err != nil {
		t.Fatalf("RespondStream: %v", err)
	}
	want := []model.Event{
		{Type: "text_delta", Delta: "Hel"}, {Type: "text_delta", Delta: "lo"},
		{Type: "call_started", Name: "exec_command"},
		{Type: "call_arguments_delta", Delta: `{"cmd":`}, {Type: "call_arguments_delta", Delta: `"pwd"}`},
	}
	if len(got) != len(want) {
		t.Fatalf("events = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if r.Text() != "Hello" || len(r.Calls()) != 1 || r.Calls()[0].Arguments != `{"cmd":"pwd"}` || r.Usage.TotalTokens != 10 {
		t.Errorf("streamed response = %+v", r)
	}
	if b := srv.requests()[0].Body; b["stream"] != true {
		t.Errorf("request did not ask to stream: %v", b["stream"])
	}
}

func TestResponsesStreamThatStopsEarlyIsAnError(t *testing.T) {
	srv := newFakeServer(t, reply{typed: true, events: []string{
		jsonOf(t, map[string]any{"type": "response.output_text.delta", "sequence_number": 1, "item_id": "m", "output_index": 0, "content_index": 0, "delta": "Hel", "logprobs": []any{}}),
	}})
	m := newModel(t, openai.Config{BaseURL: srv.URL(), Stream: true})
	_, err := m.Respond(context.Background(), model.Request{Input: []model.Item{{Type: model.ItemMessage, Text: "hi"}}})
	if err == nil {
		t.Fatal("a stream without response.completed was accepted")
	}
	contains(t, err.Error(), "ended before a response.completed")
	contains(t, err.Error(), srv.URL())
}

func TestResponsesFailedStatusIsAnError(t *testing.T) {
	body := responsesBody("resp_f", []map[string]any{}, 1, 0)
	body["status"] = "failed"
	body["error"] = map[string]any{"code": "server_error", "message": "the model crashed"}
	srv := newFakeServer(t, reply{body: jsonOf(t, body)})
	m := newModel(t, openai.Config{BaseURL: srv.URL()})
	_, err := m.Respond(context.Background(), model.Request{Input: []model.Item{{Type: model.ItemMessage, Text: "hi"}}})
	if err == nil {
		t.Fatal("a failed response was accepted")
	}
	contains(t, err.Error(), "the model crashed")
}
