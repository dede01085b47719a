package openai_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// fakeServer speaks just enough of the OpenAI wire format (JSON bodies and
// server-sent events) to drive the real openai-go client. Each request is
// answered by the next reply in turn; the last reply repeats.
type fakeServer struct {
	t       *testing.T
	srv     *httptest.Server
	mu      sync.Mutex
	replies []reply
	reqs    []recorded
}

type recorded struct {
	Path   string
	Auth   string
	Retry  string
	Body   map[string]any
	RawLen int
}

// reply is one canned answer: a status, headers and a body, or SSE events.
type reply struct {
	status  int
	header  map[string]string
	body    string
	events  []string // each a JSON data payload; sent as SSE when set
	typed   bool     // also send "event: <type>" lines (Responses API style)
	doneMsg bool     // end the stream with data: [DONE] (Chat Completions style)
}

func newFakeServer(t *testing.T, replies ...reply) *fakeServer {
	t.Helper()
	f := &fakeServer{t: t, replies: replies}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeServer) URL() string { return f.srv.URL + "/v1" }

func (f *fakeServer) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	rec := recorded{Path: r.URL.Path, Auth: r.Header.Get("Authorization"), Retry: r.Header.Get("X-Stainless-Retry-Count"), RawLen: len(raw)}
	_ = json.Unmarshal(raw, &rec.Body)
	f.mu.Lock()
	n := len(f.reqs)
	f.reqs = append(f.reqs, rec)
	rp := f.replies[min(n, len(f.replies)-1)]
	f.mu.Unlock()

	for k, v := range rp.header {
		w.Header().Set(k, v)
	}
	status := rp.status
	if status == 0 {
		status = http.StatusOK
	}
	if rp.events == nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, rp.body)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(status)
	fl, _ := w.(http.Flusher)
	for _, ev := range rp.events {
		if rp.typed {
			var head struct{ Type string }
			_ = json.Unmarshal([]byte(ev), &head)
			fmt.Fprintf(w, "event: %s\n", head.Type)
		}
		fmt.Fprintf(w, "data: %s\n\n", ev)
		if fl != nil {
			fl.Flush()
		}
	}
	if rp.doneMsg {
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	}
}

// requests returns what the server received so far.
func (f *fakeServer) requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.reqs...)
}

// jsonOf marshals v for embedding in canned bodies.
func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// dig walks a decoded JSON value by object keys and array indexes.
func dig(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			a, ok := v.([]any)
			if !ok || k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

func contains(t *testing.T, got, want string) {
	t.Helper()
	if !strings.Contains(got, want) {
		t.Errorf("%q does not contain %q", got, want)
	}
}
