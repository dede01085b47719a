package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox/agentbox/agent/model/openai"
)

// responsesSSE answers POST /responses as the Responses API streams: the
// text in deltas, then response.completed with the whole response. A
// request that does not ask to stream gets the plain JSON response.
func responsesSSE(t *testing.T, deltas []string, streamed *[]bool) *httptest.Server {
	t.Helper()
	var mu sync.Mutex
	text := strings.Join(deltas, "")
	final := map[string]any{
		"id": "resp_1", "object": "response", "created_at": 1, "status": "completed", "model": "gpt-test",
		"parallel_tool_calls": true, "tool_choice": "auto", "tools": []any{},
		"output": []any{map[string]any{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}}},
		"usage": map[string]any{"input_tokens": 5, "output_tokens": 3, "total_tokens": 8,
			"input_tokens_details": map[string]any{"cached_tokens": 0}, "output_tokens_details": map[string]any{"reasoning_tokens": 0}},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Stream bool `json:"stream"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		*streamed = append(*streamed, body.Stream)
		mu.Unlock()
		if !body.Stream {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(final)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		send := func(v map[string]any) {
			b, _ := json.Marshal(v)
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", v["type"], b)
			w.(http.Flusher).Flush()
		}
		for i, d := range deltas {
			send(map[string]any{"type": "response.output_text.delta", "sequence_number": i, "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": d, "logprobs": []any{}})
		}
		send(map[string]any{"type": "response.completed", "sequence_number": len(deltas), "response": final})
	}))
	t.Cleanup(srv.Close)
	return srv
}

// A run someone watches takes the provider's streaming path and passes the
// text on as it comes; a run nobody watches asks for the whole answer.
func TestRunnerStreamsTextToWhoeverWatches(t *testing.T) {
	deltas := []string{"Three ", "discrepancies ", "found."}
	var streamed []bool
	srv := responsesSSE(t, deltas, &streamed)
	m, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", APIKey: "k", Model: "gpt-test", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	onEvent := func(e Event) {
		if e.Type == EventTextDelta {
			got = append(got, e.Text)
		}
	}
	res, err := (&Runner{}).Run(context.Background(), &SandboxAgent{Name: "s", Model: m}, "go", RunConfig{Sandbox: SandboxConfig{Client: newClient(t)}, OnEvent: onEvent})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, "|") != strings.Join(deltas, "|") || res.FinalOutput != "Three discrepancies found." {
		t.Errorf("deltas %q, final %q", got, res.FinalOutput)
	}
	if _, err := (&Runner{}).Run(context.Background(), &SandboxAgent{Name: "s", Model: m}, "go", RunConfig{Sandbox: SandboxConfig{Client: newClient(t)}}); err != nil {
		t.Fatal(err)
	}
	if len(streamed) != 2 || !streamed[0] || streamed[1] {
		t.Errorf("requests asked to stream: %v, want [true false]", streamed)
	}
}
