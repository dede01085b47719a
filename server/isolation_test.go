package server

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/server/api"
)

// With tenant A's key, every route on tenant B's session, files and
// snapshots answers 404 exactly as an unknown id, changes nothing, and no
// listing shows any of B's.
func TestATenantFindsNothingOfAnother(t *testing.T) {
	ts := newTestServer(t, Config{})
	a, b := ts.key(t, "tenant-a"), ts.key(t, "tenant-b")
	bs := ts.createSession(t, b)
	ts.ok(t, b, "PUT", "/v1/sessions/"+bs.ID+"/files?path=secret.txt", "b's data", http.StatusNoContent, nil)
	var snap api.Snapshot
	ts.ok(t, b, "POST", "/v1/sessions/"+bs.ID+"/snapshots", nil, http.StatusCreated, &snap)

	unknown := "no-such-session"
	routes := []struct {
		method, path string
		body         any
	}{
		{"GET", "/v1/sessions/%s", nil},
		{"DELETE", "/v1/sessions/%s", nil},
		{"PATCH", "/v1/sessions/%s", api.UpdateSession{TTL: api.Duration(time.Hour)}},
		{"POST", "/v1/sessions/%s/stop", nil},
		{"POST", "/v1/sessions/%s/rebuild", nil},
		{"POST", "/v1/sessions/%s/exec", api.Exec{Cmd: []string{"true"}}},
		{"GET", "/v1/sessions/%s/processes", nil},
		{"GET", "/v1/sessions/%s/processes/p-0", nil},
		{"GET", "/v1/sessions/%s/files?path=secret.txt", nil},
		{"PUT", "/v1/sessions/%s/files?path=secret.txt", "a's data"},
		{"GET", "/v1/sessions/%s/dir?path=.", nil},
		{"GET", "/v1/sessions/%s/stat?path=secret.txt", nil},
		{"DELETE", "/v1/sessions/%s/files?path=secret.txt", nil},
		{"GET", "/v1/sessions/%s/archive", nil},
		{"PUT", "/v1/sessions/%s/archive", "not read"},
		{"POST", "/v1/sessions/%s/promote", `{"rules": {"outputs": [{"glob": "*.txt"}]}}`},
		{"POST", "/v1/sessions/%s/snapshots", nil},
		{"POST", "/v1/sessions/%s/pause", nil},
		{"GET", "/v1/traces/%s", nil},
		{"POST", "/v1/sessions/%s/unpause", nil},
		{"GET", "/v1/sessions/%s/ports/8000", nil},
	}
	for _, m := range proxiedMethods {
		routes = append(routes, struct {
			method, path string
			body         any
		}{m, "/v1/sessions/%s/ports/8000/http/index.html", nil})
	}
	// Every route on a session is tried.
	tried := map[string]bool{}
	for _, r := range routes {
		p, _, _ := strings.Cut(r.path, "?")
		p = strings.Replace(p, "%s", "{id}", 1)
		p = strings.NewReplacer("p-0", "{pid}", "/8000", "/{port}", "/index.html", "/{path...}").Replace(p)
		tried[r.method+" "+p] = true
	}
	routed := map[string]bool{}
	(&Server{}).routes(&recordingMux{routes: routed})
	for r := range routed {
		if strings.Contains(r, "{id}") && !tried[r] {
			t.Errorf("route %s is not tried with another tenant's session", r)
		}
	}
	for _, r := range routes {
		t.Run(r.method+" "+r.path, func(t *testing.T) {
			_, wantBody := ts.call(t, a, r.method, sprintf(r.path, unknown), r.body)
			status, body := ts.call(t, a, r.method, sprintf(r.path, bs.ID), r.body)
			if status != http.StatusNotFound {
				t.Fatalf("tenant A on B's session: status %d %s, want 404", status, body)
			}
			if got, want := string(body), replaceID(string(wantBody), unknown, bs.ID); got != want {
				t.Errorf("the answer on B's session differs from the one on an unknown id:\n%s\n%s", got, want)
			}
		})
	}
	if n := ts.sessionCount(t, a); n != 0 {
		t.Errorf("tenant A lists %d sessions", n)
	}
	var snaps api.SnapshotList
	ts.ok(t, a, "GET", "/v1/snapshots", nil, http.StatusOK, &snaps)
	if len(snaps.Snapshots) != 0 {
		t.Errorf("tenant A lists B's snapshots: %+v", snaps.Snapshots)
	}
	ts.refused(t, a, "POST", "/v1/sessions", api.CreateSession{Spec: sandbox.Spec{Snapshot: snap.ID}}, http.StatusNotFound, api.KindNotFound, snap.ID)

	// B's session is as B left it.
	status, data := ts.call(t, b, "GET", "/v1/sessions/"+bs.ID+"/files?path=secret.txt", nil)
	if status != http.StatusOK || string(data) != "b's data" {
		t.Fatalf("B's file after A's attempts: %d %q", status, data)
	}
	ts.ok(t, b, "POST", "/v1/sessions", api.CreateSession{Spec: sandbox.Spec{Snapshot: snap.ID}}, http.StatusCreated, nil)
}
