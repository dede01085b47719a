package openai_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/agentbox/agentbox/agent/model"
	"github.com/agentbox/agentbox/agent/model/openai"
)

var hi = model.Request{Input: []model.Item{{Type: model.ItemMessage, Role: model.RoleUser, Text: "hi"}}}

func okBody(t *testing.T, api string) string {
	if api == "chat" {
		return jsonOf(t, chatBody("cc", map[string]any{"role": "assistant", "content": "ok", "refusal": nil}, "stop", 1, 1))
	}
	return jsonOf(t, responsesBody("resp", []map[string]any{textItem("ok")}, 1, 1))
}

func TestRetries(t *testing.T) {
	for _, api := range []string{"responses", "chat"} {
		t.Run(api+": a 429 with Retry-After is waited out and then succeeds", func(t *testing.T) {
			srv := newFakeServer(t,
				reply{status: 429, header: map[string]string{"Retry-After": "0.3"}, body: `{"error":{"message":"slow down","type":"rate_limit"}}`},
				reply{body: okBody(t, api)})
			m := newModel(t, openai.Config{API: api, BaseURL: srv.URL()})
			start := time.Now()
			r, err := m.Respond(context.Background(), hi)
			if err != nil {
				t.Fatalf("Respond: %v", err)
			}
			if r.Text() != "ok" {
				t.Errorf("text = %q", r.Text())
			}
			reqs := srv.requests()
			if len(reqs) != 2 || reqs[1].Retry != "1" {
				t.Errorf("server saw %d requests (retry header %q), want 2 with retry count 1", len(reqs), reqs[len(reqs)-1].Retry)
			}
			if waited := time.Since(start); waited < 300*time.Millisecond {
				t.Errorf("retried after %v, before the server's Retry-After of 300ms", waited)
			}
		})
		t.Run(api+": a server failing with 500 every time is retried MaxRetries times then reported", func(t *testing.T) {
			srv := newFakeServer(t, reply{status: 500, body: `{"error":{"message":"boom","type":"server_error"}}`})
			m := newModel(t, openai.Config{API: api, BaseURL: srv.URL(), MaxRetries: 3, MaxRetryDelay: 5 * time.Millisecond})
			_, err := m.Respond(context.Background(), hi)
			var me *model.Error
			if !errors.As(err, &me) {
				t.Fatalf("error %v is not a *model.Error", err)
			}
			if me.StatusCode != 500 || !me.Retryable || me.BaseURL != srv.URL() {
				t.Errorf("error = %+v", me)
			}
			if n := len(srv.requests()); n != 4 {
				t.Errorf("server saw %d requests, want 1 + 3 retries", n)
			}
			contains(t, err.Error(), "after 3 retries")
			contains(t, err.Error(), "boom")
		})
		t.Run(api+": negative MaxRetries makes exactly one attempt", func(t *testing.T) {
			srv := newFakeServer(t, reply{status: 503, body: `{"error":{"message":"busy"}}`})
			m := newModel(t, openai.Config{API: api, BaseURL: srv.URL(), MaxRetries: -1})
			if _, err := m.Respond(context.Background(), hi); err == nil {
				t.Fatal("503 was accepted")
			}
			if n := len(srv.requests()); n != 1 {
				t.Errorf("server saw %d requests, want 1", n)
			}
		})
	}
}

func TestErrorsNameTheServerAndTheCause(t *testing.T) {
	down := httptest.NewServer(nil)
	downURL := down.URL + "/v1"
	down.Close()

	tests := []struct {
		name      string
		reply     *reply // nil: the server is down
		wantIn    []string
		status    int
		retryable bool
	}{
		{
			name:   "a refused API key says so and names the base URL",
			reply:  &reply{status: 401, body: `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`},
			wantIn: []string{"API key was refused", "Incorrect API key provided", "HTTP 401"},
			status: 401,
		},
		{
			name:   "a malformed JSON body is reported as such",
			reply:  &reply{body: `{"id": "resp_1", "output": [`},
			wantIn: []string{"not valid JSON"},
		},
		{
			name:   "an unknown path says the server may not implement the API",
			reply:  &reply{status: 404, body: `{"error":{"message":"no such route"}}`},
			wantIn: []string{"HTTP 404", "not found", "no such route"},
			status: 404,
		},
		{
			name:      "a server that is down says no server answers",
			wantIn:    []string{"no server answers", "connection refused"},
			retryable: true,
		},
	}
	for _, api := range []string{"responses", "chat"} {
		for _, tt := range tests {
			t.Run(api+": "+tt.name, func(t *testing.T) {
				base := downURL
				if tt.reply != nil {
					base = newFakeServer(t, *tt.reply).URL()
				}
				m := newModel(t, openai.Config{API: api, BaseURL: base, MaxRetries: 1, MaxRetryDelay: time.Millisecond})
				_, err := m.Respond(context.Background(), hi)
				if err == nil {
					t.Fatal("no error")
				}
				var me *model.Error
				if !errors.As(err, &me) {
					t.Fatalf("error %v is not a *model.Error", err)
				}
				contains(t, err.Error(), base)
				for _, w := range tt.wantIn {
					contains(t, err.Error(), w)
				}
				if me.StatusCode != tt.status || me.Retryable != tt.retryable {
					t.Errorf("status %d retryable %v, want %d %v", me.StatusCode, me.Retryable, tt.status, tt.retryable)
				}
			})
		}
	}
}

func TestStreamingErrorsAreReportedLikeTheOthers(t *testing.T) {
	for _, api := range []string{"responses", "chat"} {
		t.Run(api+": a refused key on a stream names the base URL", func(t *testing.T) {
			srv := newFakeServer(t, reply{status: 401, body: `{"error":{"message":"bad key"}}`})
			m := newModel(t, openai.Config{API: api, BaseURL: srv.URL()})
			_, err := m.RespondStream(context.Background(), hi, nil)
			if err == nil {
				t.Fatal("no error")
			}
			contains(t, err.Error(), "API key was refused")
			contains(t, err.Error(), srv.URL())
		})
	}
}

func TestConfig(t *testing.T) {
	t.Run("the base URL and key come from the environment when not given", func(t *testing.T) {
		srv := newFakeServer(t, reply{body: okBody(t, "responses")})
		t.Setenv("OPENAI_BASE_URL", srv.URL())
		t.Setenv("OPENAI_API_KEY", "sk-from-env")
		m, err := openai.New(openai.Config{Model: "m"})
		if err != nil {
			t.Fatal(err)
		}
		if m.BaseURL() != srv.URL() {
			t.Errorf("BaseURL() = %q", m.BaseURL())
		}
		if _, err := m.Respond(context.Background(), hi); err != nil {
			t.Fatal(err)
		}
		if got := srv.requests()[0].Auth; got != "Bearer sk-from-env" {
			t.Errorf("Authorization = %q", got)
		}
	})
	t.Run("an unknown API is refused", func(t *testing.T) {
		if _, err := openai.New(openai.Config{API: "completions", BaseURL: "http://127.0.0.1:1"}); err == nil {
			t.Error("accepted")
		}
	})
	t.Run("the real OpenAI endpoint without a key is refused up front", func(t *testing.T) {
		t.Setenv("OPENAI_BASE_URL", "")
		t.Setenv("OPENAI_API_KEY", "")
		_, err := openai.New(openai.Config{Model: "m"})
		if err == nil {
			t.Fatal("accepted")
		}
		contains(t, err.Error(), "OPENAI_API_KEY")
	})
	t.Run("a request without any model name is refused", func(t *testing.T) {
		m, err := openai.New(openai.Config{BaseURL: "http://127.0.0.1:1", APIKey: "k"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = m.Respond(context.Background(), hi)
		if err == nil {
			t.Fatal("accepted")
		}
		contains(t, err.Error(), "no model name")
	})
	t.Run("the request's model setting overrides the configured one", func(t *testing.T) {
		srv := newFakeServer(t, reply{body: okBody(t, "chat")})
		m := newModel(t, openai.Config{API: "chat", BaseURL: srv.URL(), Model: "a"})
		req := hi
		req.Settings.Model = "b"
		if _, err := m.Respond(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		if got := srv.requests()[0].Body["model"]; got != "b" {
			t.Errorf("model sent = %v", got)
		}
	})
}

func TestErrorsInsideAStreamAreReported(t *testing.T) {
	tests := []struct {
		name  string
		api   string
		reply reply
		want  string
	}{
		{"chat: an error payload mid-stream", "chat", reply{doneMsg: true, events: []string{
			jsonOf(t, chunk(map[string]any{"content": "par"})),
			`{"error":{"message":"model overloaded","type":"server_error"}}`,
		}}, "model overloaded"},
		{"responses: an error event", "responses", reply{typed: true, events: []string{
			`{"type":"error","sequence_number":1,"code":"server_error","message":"the backend fell over","param":null}`,
		}}, "the backend fell over"},
		{"chat: a stream with no chunks", "chat", reply{doneMsg: true, events: []string{}}, "without a single chunk"},
		{"chat: a chunk that is not JSON", "chat", reply{events: []string{`{"id": "x", "choices": [`}}, "not valid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name+" is an error naming the server", func(t *testing.T) {
			srv := newFakeServer(t, tt.reply)
			m := newModel(t, openai.Config{API: tt.api, BaseURL: srv.URL(), MaxRetries: -1})
			_, err := m.RespondStream(context.Background(), hi, nil)
			if err == nil {
				t.Fatal("no error")
			}
			contains(t, err.Error(), tt.want)
			contains(t, err.Error(), srv.URL())
		})
	}
}
