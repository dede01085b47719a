package server

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/agentbox/agentbox/server/api"
)

// The reaper deletes a session past its TTL or idle for longer than its
// idle timeout; PATCH moves either.
func TestTheReaperEndsExpiredAndIdleSessionsAndPatchExtendsThem(t *testing.T) {
	ts := newTestServer(t, Config{Defaults: Limits{TTL: time.Hour, IdleTimeout: 10 * time.Minute}})
	now := time.Now()
	ts.opts.Now = func() time.Time { return now }
	tok := ts.key(t, "acme")
	var short, idle, extended api.Session
	ts.ok(t, tok, "POST", "/v1/sessions", api.CreateSession{TTL: api.Duration(time.Minute)}, http.StatusCreated, &short)
	ts.ok(t, tok, "POST", "/v1/sessions", api.CreateSession{}, http.StatusCreated, &idle)
	ts.ok(t, tok, "POST", "/v1/sessions", api.CreateSession{TTL: api.Duration(time.Minute)}, http.StatusCreated, &extended)
	if want := now.Add(time.Minute).UTC(); !short.ExpiresAt.Equal(want) {
		t.Fatalf("expires at %v, want %v", short.ExpiresAt, want)
	}
	var got api.Session
	ts.ok(t, tok, "PATCH", "/v1/sessions/"+extended.ID, api.UpdateSession{TTL: api.Duration(30 * time.Minute), IdleTimeout: api.Duration(20 * time.Minute)}, http.StatusOK, &got)
	if want := now.Add(30 * time.Minute).UTC(); !got.ExpiresAt.Equal(want) || got.IdleTimeout != api.Duration(20*time.Minute) {
		t.Fatalf("after the patch: %+v", got)
	}
	ts.ok(t, tok, "PATCH", "/v1/sessions/"+extended.ID, api.UpdateSession{TTL: api.Duration(48 * time.Hour)}, http.StatusOK, &got)
	if want := now.Add(time.Hour).UTC(); !got.ExpiresAt.Equal(want) {
		t.Fatalf("a TTL above the tenant's: expires at %v, want the tenant's ceiling %v", got.ExpiresAt, want)
	}

	now = now.Add(11 * time.Minute)
	ts.reap(context.Background())
	ts.refused(t, tok, "GET", "/v1/sessions/"+short.ID, nil, http.StatusNotFound, api.KindNotFound)
	ts.refused(t, tok, "GET", "/v1/sessions/"+idle.ID, nil, http.StatusNotFound, api.KindNotFound)
	ts.ok(t, tok, "GET", "/v1/sessions/"+extended.ID, nil, http.StatusOK, nil)
	if recs, _ := ts.reg.Sessions(); len(recs) != 1 {
		t.Fatalf("%d registry rows after the reap, want 1", len(recs))
	}
}
