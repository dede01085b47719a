package agent

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox/agentbox/agent/model/openai"
)

// TestRunnerDrivesARealChatCompletionsClient runs the runner with the
// openai provider against an HTTP server speaking the Chat Completions
// wire format: the first reply asks for a command, the second checks that
// the command's output came back as a tool message and answers.
func TestRunnerDrivesARealChatCompletionsClient(t *testing.T) {
	var mu sync.Mutex
	var bodies []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		bodies = append(bodies, body)
		n := len(bodies)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		msg := map[string]any{"role": "assistant", "content": "the file says hello"}
		finish := "stop"
		if n == 1 {
			msg = map[string]any{"role": "assistant", "content": nil, "tool_calls": []map[string]any{{
				"id": "call_abc", "type": "function",
				"function": map[string]any{"name": "exec_command", "arguments": `{"cmd":"echo hello from the sandbox"}`},
			}}}
			finish = "tool_calls"
		}
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "test-model",
			"choices": []map[string]any{{"index": 0, "message": msg, "finish_reason": finish}},
			"usage":   map[string]any{"prompt_tokens": 50, "completion_tokens": 5, "total_tokens": 55},
		})
	}))
	defer srv.Close()

	m, err := openai.New(openai.Config{API: openai.APIChat, BaseURL: srv.URL + "/v1", APIKey: "test", Model: "test-model", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	res, err := (&Runner{}).Run(context.Background(), &SandboxAgent{Name: "wire", Model: m}, "what does it say?", RunConfig{Sandbox: SandboxConfig{Client: newClient(t)}})
	if err != nil {
		t.Fatal(err)
	}
	if res.FinalOutput != "the file says hello" || res.Turns != 2 || res.Usage.TotalTokens != 110 {
		t.Fatalf("result: %q after %d turns, %d tokens", res.FinalOutput, res.Turns, res.Usage.TotalTokens)
	}
	mu.Lock()
	defer mu.Unlock()
	tools, _ := json.Marshal(bodies[0]["tools"])
	if !strings.Contains(string(tools), `"exec_command"`) || !strings.Contains(string(tools), `"apply_patch"`) {
		t.Errorf("tools sent: %s", tools)
	}
	msgs, _ := json.Marshal(bodies[1]["messages"])
	if !strings.Contains(string(msgs), `"tool_call_id":"call_abc"`) || !strings.Contains(string(msgs), "hello from the sandbox") {
		t.Errorf("second request does not carry the tool output: %s", msgs)
	}
}
