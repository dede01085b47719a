package trace

import (
	"bytes"
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/agentbox/agentbox/agent/model"
)

func intp(n int) *int { return &n }

// sampleRun emits the events of a short run with one failing tool call.
func sampleRun(w *Writer) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	yes := true
	for _, e := range []Event{
		{Time: at(0), Type: RunStart, Agent: "reconcile", Model: "scripted", Input: "reconcile the books"},
		{Time: at(5), Type: ModelRequest, Turn: 1, Items: 1, Tools: []string{"exec_command"}, InstructionBytes: 900},
		{Time: at(30), Type: ModelResponse, Turn: 1, Calls: []string{"exec_command"}, Usage: &model.Usage{InputTokens: 100, OutputTokens: 20, TotalTokens: 120}, DurationMS: 25},
		{Time: at(31), Type: ToolCall, Turn: 1, Tool: "exec_command", CallID: "c1", Arguments: `{"cmd":"python3 reconcile.py"}`},
		{Time: at(32), Type: Approval, Turn: 1, Tool: "exec_command", CallID: "c1", Approved: &yes, Rule: "exec_command ~ python"},
		{Time: at(150), Type: SandboxExec, Turn: 1, Tool: "exec_command", CallID: "c1", Cmd: "python3 reconcile.py", ExitCode: intp(1), DurationMS: 118},
		{Time: at(151), Type: ToolResult, Turn: 1, Tool: "exec_command", CallID: "c1", Bytes: 300, ExitCode: intp(1), DurationMS: 120},
		{Time: at(152), Type: ModelRequest, Turn: 2, Items: 3},
		{Time: at(160), Type: Error, Turn: 2, Err: "agent: turn 2: model scripted: plan ran out of steps"},
		{Time: at(161), Type: RunEnd, Turns: 2, Usage: &model.Usage{TotalTokens: 120}, DurationMS: 161},
	} {
		if err := w.Emit(e); err != nil {
			panic(err)
		}
	}
}

func TestWriterWritesOneFlushedLinePerEvent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.jsonl")
	w, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	sampleRun(w)
	// Read before Close: every event must already be on disk.
	evs, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 10 {
		t.Fatalf("read %d events before close, want 10", len(evs))
	}
	for i, e := range evs {
		if e.Seq != int64(i+1) || e.RunID != w.RunID() || e.TraceID != w.TraceID() {
			t.Errorf("event %d: seq %d run %q trace %q", i, e.Seq, e.RunID, e.TraceID)
		}
	}
	if len(w.TraceID()) != 32 || len(w.RunID()) != 16 {
		t.Errorf("ids %q %q, want 32 and 16 hex digits", w.TraceID(), w.RunID())
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestDecode(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		n       int
		wantErr string
	}{
		{"a last line torn by a crash is dropped", `{"type":"run_start","seq":1}` + "\n" + `{"type":"tool_ca`, 1, ""},
		{"a malformed line in the middle is an error naming it", `{"type":"run_start"}` + "\n" + "garbage\n" + `{"type":"run_end"}` + "\n", 1, "line 2"},
		{"an empty trace has no events", "", 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs, err := Decode(strings.NewReader(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || len(evs) != tt.n {
				t.Fatalf("%d events, %v; want %d", len(evs), err, tt.n)
			}
		})
	}
}

func TestTimelineIsReadable(t *testing.T) {
	var buf bytes.Buffer
	w := New(&buf)
	sampleRun(w)
	evs, err := Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := RenderTimeline(&out, evs); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{
		"run start  agent=reconcile",
		"+0.031s  turn 1   exec_command  {\"cmd\":\"python3 reconcile.py\"}",
		"exec python3 reconcile.py  exit 1  118ms",
		"approval approved",
		"!!   +0.160s  turn 2   ERROR agent: turn 2: model scripted: plan ran out of steps",
		"run end  2 turns",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("timeline lacks %q:\n%s", want, text)
		}
	}
}

func TestOTLPExportSendsRunTurnAndToolSpans(t *testing.T) {
	var mu sync.Mutex
	var spans []*tracepb.Span
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(rw, "unexpected "+r.URL.Path, http.StatusNotFound)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var req coltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				spans = append(spans, ss.Spans...)
			}
		}
		mu.Unlock()
		out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		rw.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = rw.Write(out)
	}))
	defer srv.Close()

	w := New(io.Discard)
	if err := w.ExportOTLP(context.Background(), OTLPConfig{Endpoint: srv.URL}); err != nil {
		t.Fatal(err)
	}
	sampleRun(w)
	if err := w.Close(); err != nil {
		t.Fatalf("close (flush spans): %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	byName := map[string]*tracepb.Span{}
	for _, s := range spans {
		byName[s.Name] = s
		if hex.EncodeToString(s.TraceId) != w.TraceID() {
			t.Errorf("span %s in trace %x, want %s", s.Name, s.TraceId, w.TraceID())
		}
	}
	run, turn1, turn2, tool := byName["agent.run"], byName["turn 1"], byName["turn 2"], byName["tool exec_command"]
	if run == nil || turn1 == nil || turn2 == nil || tool == nil {
		t.Fatalf("spans received: %v", names(spans))
	}
	if !bytes.Equal(turn1.ParentSpanId, run.SpanId) || !bytes.Equal(tool.ParentSpanId, turn1.SpanId) {
		t.Error("spans are not nested run -> turn -> tool")
	}
	if run.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR {
		t.Errorf("run span status %v, want error", run.Status)
	}
	if d := time.Duration(run.EndTimeUnixNano - run.StartTimeUnixNano); d != 161*time.Millisecond {
		t.Errorf("run span lasts %s, want the trace's 161ms", d)
	}
}

func TestOTLPFromEnv(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	if _, ok := OTLPFromEnv(); ok {
		t.Fatal("no endpoint set but OTLPFromEnv is on")
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/")
	if cfg, ok := OTLPFromEnv(); !ok || cfg.Endpoint != "http://collector:4318/v1/traces" {
		t.Fatalf("got %+v %v", cfg, ok)
	}
	_ = os.Unsetenv("OTEL_EXPORTER_OTLP_ENDPOINT")
}

func names(spans []*tracepb.Span) []string {
	var n []string
	for _, s := range spans {
		n = append(n, s.Name)
	}
	return n
}
