package server

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/server/api"
	"github.com/agentbox/agentbox/trace"
)

// A session's steps are in its tenant's trace, readable after the
// session is deleted; another tenant finds no trace of it.
func TestEachSessionsTraceIsKeptForItsTenantOnly(t *testing.T) {
	ts := newTestServer(t, Config{})
	a, b := ts.key(t, "tenant-a"), ts.key(t, "tenant-b")
	s := ts.createSession(t, a)
	base := "/v1/sessions/" + s.ID
	ts.ok(t, a, "POST", base+"/exec", api.Exec{Cmd: []string{"sh", "-c", "echo hi; exit 3"}}, http.StatusOK, nil)
	ts.ok(t, a, "PUT", base+"/files?path=report.md", "# report", http.StatusNoContent, nil)
	ts.ok(t, a, "POST", base+"/snapshots", nil, http.StatusCreated, nil)
	ts.ok(t, a, "DELETE", base, nil, http.StatusNoContent, nil)

	status, data := ts.call(t, a, "GET", "/v1/traces/"+s.ID, nil)
	if status != http.StatusOK {
		t.Fatalf("GET trace of a deleted session: %d %s", status, data)
	}
	evs, err := trace.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("the trace is not JSONL events: %v\n%s", err, data)
	}
	var steps []string
	for _, e := range evs {
		step := string(e.Type)
		switch e.Type {
		case trace.SandboxExec:
			if e.ExitCode == nil {
				t.Fatalf("exec event without its exit code: %+v", e)
			}
			step += " " + e.Cmd + " =" + strings.Repeat("I", *e.ExitCode)
		case trace.ToolCall:
			step += " " + e.Tool + " " + e.Arguments
		case trace.RunEnd:
			step += " " + e.Output
		}
		steps = append(steps, strings.TrimSpace(step))
	}
	want := []string{"run_start", "sandbox_exec sh -c echo hi; exit 3 =III", "tool_call write_file report.md", "tool_call snapshot", "run_end deleted"}
	if strings.Join(steps, "\n") != strings.Join(want, "\n") {
		t.Fatalf("trace steps:\n%s\nwant:\n%s", strings.Join(steps, "\n"), strings.Join(want, "\n"))
	}
	if evs[0].Session != s.ID {
		t.Errorf("run_start names session %q, want %s", evs[0].Session, s.ID)
	}

	var list api.TraceList
	ts.ok(t, a, "GET", "/v1/traces", nil, http.StatusOK, &list)
	if len(list.Traces) != 1 || list.Traces[0].Session != s.ID {
		t.Errorf("tenant A's traces = %+v", list.Traces)
	}
	ts.ok(t, b, "GET", "/v1/traces", nil, http.StatusOK, &list)
	if len(list.Traces) != 0 {
		t.Errorf("tenant B lists A's traces: %+v", list.Traces)
	}
	_, unknown := ts.call(t, b, "GET", "/v1/traces/no-such-session", nil)
	status, got := ts.call(t, b, "GET", "/v1/traces/"+s.ID, nil)
	if status != http.StatusNotFound || string(got) != strings.ReplaceAll(string(unknown), "no-such-session", s.ID) {
		t.Fatalf("tenant B on A's trace: %d %s, want the 404 of an unknown id %s", status, got, unknown)
	}
	for _, id := range []string{"..%2Ftenant-b%2Ftraces%2Fx", ".hidden", "a%00b"} {
		ts.refused(t, a, "GET", "/v1/traces/"+id, nil, http.StatusNotFound, api.KindNotFound)
	}
}
