package server

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/server/api"
)

func TestASessionIsCreatedUsedAndDeletedOverHTTP(t *testing.T) {
	ts := newTestServer(t, Config{})
	tok := ts.key(t, "acme")
	s := ts.createSession(t, tok)
	if s.Status != api.StatusRunning || s.ID == "" || s.Backend != "linux" || !s.Spec.Detached {
		t.Fatalf("created %+v; want a running, detached linux session", s)
	}
	var got api.Session
	ts.ok(t, tok, "GET", "/v1/sessions/"+s.ID, nil, http.StatusOK, &got)
	if got.ID != s.ID {
		t.Fatalf("get gave %s", got.ID)
	}
	if n := ts.sessionCount(t, tok); n != 1 {
		t.Fatalf("list shows %d sessions, want 1", n)
	}

	stdin := api.Blob("from stdin")
	var res api.ExecResult
	ts.ok(t, tok, "POST", "/v1/sessions/"+s.ID+"/exec", api.Exec{Cmd: []string{"sh", "-c", "cat; echo; echo oops >&2; exit 3"}, Stdin: &stdin}, http.StatusOK, &res)
	if string(res.Stdout) != "from stdin\n" || string(res.Stderr) != "oops\n" || res.ExitCode != 3 {
		t.Fatalf("exec: %+v", res)
	}

	ts.ok(t, tok, "PUT", "/v1/sessions/"+s.ID+"/files?path=dir/a.txt&mode=0640", "hello", http.StatusNoContent, nil)
	status, data := ts.call(t, tok, "GET", "/v1/sessions/"+s.ID+"/files?path=/workspace/dir/a.txt", nil)
	if status != http.StatusOK || string(data) != "hello" {
		t.Fatalf("read back: %d %q", status, data)
	}
	var dir api.FileList
	ts.ok(t, tok, "GET", "/v1/sessions/"+s.ID+"/dir?path=dir", nil, http.StatusOK, &dir)
	if len(dir.Files) != 1 || dir.Files[0].Name != "a.txt" || dir.Files[0].Mode.Perm() != 0o640 {
		t.Fatalf("dir: %+v", dir.Files)
	}
	ts.ok(t, tok, "POST", "/v1/sessions/"+s.ID+"/exec", api.Exec{Cmd: []string{"cat", "dir/a.txt"}}, http.StatusOK, &res)
	if string(res.Stdout) != "hello" {
		t.Fatalf("the sandbox reads %q", res.Stdout)
	}

	ts.ok(t, tok, "DELETE", "/v1/sessions/"+s.ID, nil, http.StatusNoContent, nil)
	ts.refused(t, tok, "GET", "/v1/sessions/"+s.ID, nil, http.StatusNotFound, api.KindNotFound, s.ID)
	if n := ts.sessionCount(t, tok); n != 0 {
		t.Fatalf("list shows %d sessions after the delete", n)
	}
	if recs, _ := ts.reg.Sessions(); len(recs) != 0 {
		t.Fatalf("the registry keeps %d rows after the delete", len(recs))
	}
}

func TestARequestWithoutAValidKeyIsRefusedAndDoesNothing(t *testing.T) {
	ts := newTestServer(t, Config{})
	good := ts.key(t, "acme")
	revoked := ts.key(t, "acme")
	id := strings.Split(strings.TrimPrefix(revoked, keyPrefix), "_")[0]
	if _, err := ts.reg.RevokeKey(id); err != nil {
		t.Fatal(err)
	}
	wrong := good[:len(good)-4] + "0000"
	if wrong == good {
		wrong = good[:len(good)-4] + "1111"
	}
	for _, tc := range []struct{ name, tok, path string }{
		{"no key", "", "/v1/sessions"},
		{"a wrong secret", wrong, "/v1/sessions"},
		{"a key that is not one", "hunter2", "/v1/sessions"},
		{"a revoked key", revoked, "/v1/sessions"},
		{"a valid key in the query string", "", "/v1/sessions?token=" + good},
		{"a valid key in the query string beside the header", good, "/v1/sessions?k=" + good},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts.refused(t, tc.tok, "POST", tc.path, api.CreateSession{}, http.StatusUnauthorized, api.KindUnauthorized)
		})
	}
	if n := ts.sessionCount(t, good); n != 0 {
		t.Fatalf("%d sessions were created by refused requests", n)
	}
}

func TestBadInputIsRefusedWithAMessageAndCreatesNothing(t *testing.T) {
	base := t.TempDir()
	ts := newTestServer(t, Config{Defaults: Limits{Body: 1 << 10, Network: []string{"pypi.org"}, HostBase: base, ExecTimeout: 60e9, Disk: 1 << 30}})
	tok := ts.key(t, "acme")
	for _, tc := range []struct {
		name  string
		body  any
		kind  string
		words []string
	}{
		{"malformed JSON", `{"spec": `, api.KindInvalid, []string{"malformed JSON"}},
		{"an unknown field", `{"spek": {}}`, api.KindInvalid, []string{"spek"}},
		{"a wrong type", `{"spec": {"env": ["A=1"]}}`, api.KindInvalid, []string{"spec.env"}},
		{"a body over the limit", `{"spec": {"labels": {"x": "` + strings.Repeat("a", 2<<10) + `"}}}`, api.KindTooLarge, []string{"too large"}},
		{"host networking", api.CreateSession{Spec: sandbox.Spec{Policy: sandbox.Policy{Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkHost}}}}, api.KindInvalid, []string{"host networking"}},
		{"a host above the network ceiling", api.CreateSession{Spec: sandbox.Spec{Policy: sandbox.Policy{Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkAllowList, Allow: []string{"evil.example"}}}}}, api.KindInvalid, []string{"evil.example", "pypi.org"}},
		{"an exec timeout above the ceiling", api.CreateSession{Spec: sandbox.Spec{Policy: sandbox.Policy{Resources: sandbox.Resources{ExecTimeout: 3600e9}}}}, api.KindInvalid, []string{"exec_timeout", "1m0s"}},
		{"a workspace outside the host base", api.CreateSession{Spec: sandbox.Spec{Workspace: "/etc"}}, api.KindPathEscape, []string{"/etc", base}},
		{"a mount outside the host base", api.CreateSession{Spec: sandbox.Spec{Mounts: []sandbox.Mount{{Source: "/root", Target: "/mnt/r"}}}}, api.KindPathEscape, []string{"/root"}},
		{"a workspace reached through ..", api.CreateSession{Spec: sandbox.Spec{Workspace: base + "/../.."}}, api.KindPathEscape, []string{"outside"}},
		{"a snapshot the tenant does not have", api.CreateSession{Spec: sandbox.Spec{Snapshot: "0123abcd"}}, api.KindNotFound, []string{"0123abcd"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts.refused(t, tok, "POST", "/v1/sessions", tc.body, func() int {
				switch tc.kind {
				case api.KindTooLarge:
					return http.StatusRequestEntityTooLarge
				case api.KindNotFound:
					return http.StatusNotFound
				}
				return http.StatusBadRequest
			}(), tc.kind, tc.words...)
		})
	}
	if n := ts.sessionCount(t, tok); n != 0 {
		t.Fatalf("refused requests created %d sessions", n)
	}

	s := ts.createSession(t, tok)
	for _, p := range []string{"../../etc/passwd", "/etc/passwd"} {
		ts.refused(t, tok, "GET", "/v1/sessions/"+s.ID+"/files?path="+p, nil, http.StatusBadRequest, api.KindPathEscape, p)
		ts.refused(t, tok, "PUT", "/v1/sessions/"+s.ID+"/files?path="+p, "x", http.StatusBadRequest, api.KindPathEscape, p)
	}
	ts.refused(t, tok, "PUT", "/v1/sessions/"+s.ID+"/files?path=a&mode=4755", "x", http.StatusBadRequest, api.KindInvalid, "4755")
	ts.refused(t, tok, "POST", "/v1/sessions/"+s.ID+"/exec", api.Exec{}, http.StatusBadRequest, api.KindInvalid, "empty command")
}

func TestAQuotaRefusalNamesTheLimitAndTheUse(t *testing.T) {
	ts := newTestServer(t, Config{Tenants: map[string]Limits{"small": {Sessions: 1}}})
	tok := ts.key(t, "small")
	ts.createSession(t, tok)
	ts.refused(t, tok, "POST", "/v1/sessions", api.CreateSession{}, http.StatusForbidden, api.KindQuota, "live sessions", "limit 1", "in use 1")
	// Another tenant's use is its own.
	ts.createSession(t, ts.key(t, "other"))
}

func TestARequestOverTheTenantsRateIsRefusedAndNamesTheLimit(t *testing.T) {
	ts := newTestServer(t, Config{Tenants: map[string]Limits{"busy": {Rate: 1}}})
	now := time.Unix(1e9, 0)
	ts.opts.Now = func() time.Time { return now }
	tok := ts.key(t, "busy")
	ts.sessionCount(t, tok)
	ts.sessionCount(t, tok) // a burst of twice the rate
	ts.refused(t, tok, "GET", "/v1/sessions", nil, http.StatusTooManyRequests, api.KindRateLimited, "limit 1 a second")
	now = now.Add(time.Second)
	ts.sessionCount(t, tok)
	ts.sessionCount(t, ts.key(t, "other")) // another tenant's rate is its own
}
