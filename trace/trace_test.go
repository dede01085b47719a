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

// recorded is what run writes, read back.
func recorded(t *testing.T, run func(*Writer)) []Event {
	t.Helper()
	var buf bytes.Buffer
	run(New(&buf))
	evs, err := Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func timeline(t *testing.T, evs []Event, opts TimelineOptions) string {
	t.Helper()
	var out bytes.Buffer
	if err := RenderTimeline(&out, evs, opts); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

func TestTimelineIsReadable(t *testing.T) {
	text := timeline(t, recorded(t, sampleRun), TimelineOptions{})
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

func TestTimelineShowsWhyACommandFailed(t *testing.T) {
	evs := recorded(t, auditRun)
	text := timeline(t, evs, TimelineOptions{})
	for _, want := range []string{
		"model request  1 items, 2 tools, 41 bytes of instructions (sha256 5c1e0a6f3b2d)  store=false",
		"exec echo fixed >> statements/bank.csv  exit 2",
		"│ sh: 1: cannot create statements/bank.csv: Permission denied",
		"exec curl -sS https://example.com  exit 56  1 POLICY VIOLATION  120ms",
		`!!                       violation: egress refused: CONNECT "example.com:443"`,
		"│ +# Q1 reconciliation",
		"promotion  2 files to /srv/audit/promoted",
		"file: output/report.md  61 bytes  sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		"│ … 5 more lines (trace show --full)",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("timeline lacks %q:\n%s", want, text)
		}
	}
	if full := timeline(t, evs, TimelineOptions{Full: true}); strings.Contains(full, "more lines") || !strings.Contains(full, "│ notes-11.txt") {
		t.Errorf("--full still cuts blocks:\n%s", full)
	}
}
