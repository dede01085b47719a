package openai_test

import (
	"context"
	"testing"

	"github.com/agentbox/agentbox/agent/model"
	"github.com/agentbox/agentbox/agent/model/openai"
)

// A firm handling client data must not have the provider keep what its
// tools read: every Responses request says store=false unless the agent's
// settings say otherwise, streamed or not.
func TestResponsesRequestsSayWhetherToStore(t *testing.T) {
	yes, no := true, false
	final := responsesBody("resp_1", []map[string]any{textItem("ok")}, 1, 1)
	for _, tt := range []struct {
		name   string
		store  *bool
		stream bool
		want   bool
	}{
		{"by default a request asks the server not to store", nil, false, false},
		{"by default a streamed request asks the server not to store", nil, true, false},
		{"store: true in the settings is sent", &yes, false, true},
		{"store: true in the settings is sent when streaming", &yes, true, true},
		{"store: false in the settings is sent", &no, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rp := reply{body: jsonOf(t, final)}
			if tt.stream {
				rp = reply{typed: true, events: []string{jsonOf(t, map[string]any{"type": "response.completed", "sequence_number": 0, "response": final})}}
			}
			srv := newFakeServer(t, rp)
			m := newModel(t, openai.Config{BaseURL: srv.URL(), Stream: tt.stream})
			req := model.Request{Input: []model.Item{{Type: model.ItemMessage, Role: model.RoleUser, Text: "hi"}}, Settings: model.Settings{Store: tt.store}}
			if _, err := m.Respond(context.Background(), req); err != nil {
				t.Fatalf("Respond: %v", err)
			}
			body := srv.requests()[0].Body
			if got, ok := body["store"]; !ok || got != tt.want {
				t.Errorf("request body store = %v (present %v), want %v", got, ok, tt.want)
			}
		})
	}
}

// Chat Completions servers other than OpenAI's get no field they did not
// ask for; an explicit setting is passed on.
func TestChatRequestsCarryStoreOnlyWhenSet(t *testing.T) {
	yes := true
	body := jsonOf(t, chatBody("cc_1", map[string]any{"role": "assistant", "content": "ok", "refusal": nil}, "stop", 1, 1))
	for _, tt := range []struct {
		name    string
		store   *bool
		present bool
	}{
		{"unset, the request has no store field", nil, false},
		{"set, the request carries it", &yes, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFakeServer(t, reply{body: body})
			m := newModel(t, openai.Config{API: "chat", BaseURL: srv.URL()})
			req := model.Request{Input: []model.Item{{Type: model.ItemMessage, Role: model.RoleUser, Text: "hi"}}, Settings: model.Settings{Store: tt.store}}
			if _, err := m.Respond(context.Background(), req); err != nil {
				t.Fatalf("Respond: %v", err)
			}
			got, ok := srv.requests()[0].Body["store"]
			if ok != tt.present || (ok && got != true) {
				t.Errorf("request body store = %v (present %v), want present %v", got, ok, tt.present)
			}
		})
	}
}
