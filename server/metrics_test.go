package server

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/server/api"
)

func TestMetricsCountSessionsExecsAndRefusals(t *testing.T) {
	ts := newTestServer(t, Config{Tenants: map[string]Limits{"acme": {Sessions: 1}}})
	tok := ts.key(t, "acme")
	s := ts.createSession(t, tok)
	ts.ok(t, tok, "POST", "/v1/sessions/"+s.ID+"/exec", api.Exec{Cmd: []string{"true"}}, http.StatusOK, nil)
	ts.refused(t, tok, "POST", "/v1/sessions", api.CreateSession{}, http.StatusForbidden, api.KindQuota)

	rec := httptest.NewRecorder()
	ts.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`agentbox_sessions{backend="linux",status="running",tenant="acme"} 1`,
		`agentbox_exec_seconds_count{tenant="acme"} 1`,
		`agentbox_quota_refusals_total{kind="quota",tenant="acme"} 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
