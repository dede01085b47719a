package reconcile_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox/agentbox/agent/model/openai"
)

// TestTheSameAgentRunsWithAnOpenAIModel drives the example with the
// openai-responses provider against a local server speaking the Responses
// wire format: the model's tool call runs in the native sandbox, its
// output goes back to the server, and the outputs are promoted as with the
// scripted model.
func TestTheSameAgentRunsWithAnOpenAIModel(t *testing.T) {
	c := linuxClient(t)
	needPython(t)
	var mu sync.Mutex
	var toolNames []string
	var toolOutput string
	turn := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Tools []struct{ Name string } `json:"tools"`
			Input []struct {
				Type   string `json:"type"`
				Output string `json:"output"`
			} `json:"input"`
		}
		raw, _ := io.ReadAll(r.Body)
		if r.URL.Path != "/v1/responses" || json.Unmarshal(raw, &body) != nil {
			http.Error(w, `{"error":{"message":"unexpected request"}}`, http.StatusBadRequest)
			return
		}
		mu.Lock()
		turn++
		n := turn
		for _, tl := range body.Tools {
			toolNames = append(toolNames, tl.Name)
		}
		for _, it := range body.Input {
			if it.Type == "function_call_output" {
				toolOutput = it.Output
			}
		}
		mu.Unlock()
		item := map[string]any{"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "exec_command",
			"arguments": `{"cmd":"python3 reconcile.py"}`, "status": "completed"}
		if n > 1 {
			item = map[string]any{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
				"content": []any{map[string]any{"type": "output_text", "text": "Found 4 discrepancies; see output/report.md.", "annotations": []any{}}}}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": fmt.Sprintf("resp_%d", n), "object": "response", "created_at": 1, "status": "completed", "model": "gpt-4.1",
			"output": []any{item}, "parallel_tool_calls": true, "tool_choice": "auto", "tools": []any{},
			"usage": map[string]any{"input_tokens": 900, "output_tokens": 30, "total_tokens": 930},
		})
	}))
	defer srv.Close()

	m, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", APIKey: "sk-test", Model: "gpt-4.1"})
	if err != nil {
		t.Fatal(err)
	}
	o := runExample(t, c, m)
	if o.err != nil {
		t.Fatalf("run: %v", o.err)
	}
	if o.res.FinalOutput != "Found 4 discrepancies; see output/report.md." || o.res.Usage.TotalTokens != 1860 {
		t.Errorf("final %q, usage %+v", o.res.FinalOutput, o.res.Usage)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(strings.Join(toolNames, " "), "exec_command") {
		t.Errorf("the model was offered %v, not exec_command", toolNames)
	}
	if !strings.Contains(toolOutput, "4 discrepancies") {
		t.Errorf("the model got back:\n%s", toolOutput)
	}
	if o.rec == nil || len(o.rec.Files) != 2 {
		t.Errorf("promoted %+v", o.rec)
	}
}
