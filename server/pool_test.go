package server

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/server/api"
)

// A tenant with a pool gets its default sessions from it: a create with
// an empty spec is a hit, a session as good as a fresh one and counted in
// the quota; another spec passes through; a tenant without one has none.
func TestATenantsWarmPoolServesItsDefaultCreates(t *testing.T) {
	ts := newTestServer(t, Config{Tenants: map[string]Limits{"acme": {Pool: 2, Sessions: 3}}})
	tok, other := ts.key(t, "acme"), ts.key(t, "other")
	ts.sessionCount(t, tok) // the first request opens the tenant and its pool
	ready := func() int {
		st := ts.PoolStats("acme")
		if len(st) != 1 {
			t.Fatalf("acme's pool stats = %+v", st)
		}
		return st[0].Ready
	}
	deadline := time.Now().Add(time.Minute)
	for ready() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the pool is not full after a minute: %+v", ts.PoolStats("acme"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	s := ts.createSession(t, tok)
	if st := ts.PoolStats("acme")[0]; st.Hits != 1 {
		t.Fatalf("a default create did not come from the pool: %+v", st)
	}
	var res api.ExecResult
	ts.ok(t, tok, "POST", "/v1/sessions/"+s.ID+"/exec", api.Exec{Cmd: []string{"sh", "-c", "ls -A; echo $((6*7))"}}, http.StatusOK, &res)
	if string(res.Stdout) != "42\n" {
		t.Fatalf("a pooled session's workspace or shell: %q %q", res.Stdout, res.Stderr)
	}
	// Another spec is made on the spot.
	var small api.Session
	ts.ok(t, tok, "POST", "/v1/sessions", api.CreateSession{Spec: sandbox.Spec{Policy: sandbox.Policy{Resources: sandbox.Resources{MemoryBytes: 128 << 20}}}}, http.StatusCreated, &small)
	if st := ts.PoolStats("acme")[0]; st.Hits != 1 || small.Spec.Policy.Resources.MemoryBytes != 128<<20 {
		t.Fatalf("a create with its own spec: %+v, memory %d", st, small.Spec.Policy.Resources.MemoryBytes)
	}
	// Pooled sessions count once handed out: 2 held, 1 left of 3.
	ts.createSession(t, tok)
	ts.refused(t, tok, "POST", "/v1/sessions", api.CreateSession{}, http.StatusForbidden, api.KindQuota, "limit 3, in use 3")
	// Operators see the pool in the metrics once it has refilled.
	for ready() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the pool did not refill: %+v", ts.PoolStats("acme"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	st := ts.PoolStats("acme")[0]
	if st.Hits+st.Miss != 2 {
		t.Fatalf("two default creates, and the pool counted %+v", st)
	}
	rec := httptest.NewRecorder()
	ts.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, want := range []string{
		`agentbox_pool_ready{tenant="acme"} 2`,
		fmt.Sprintf(`agentbox_pool_creates_total{result="hit",tenant="acme"} %d`, st.Hits),
		fmt.Sprintf(`agentbox_pool_creates_total{result="miss",tenant="acme"} %d`, st.Miss),
	} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	ts.sessionCount(t, other)
	if st := ts.PoolStats("other"); st != nil {
		t.Fatalf("a tenant without a pool has one: %+v", st)
	}
}
