package server

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentbox/agentbox/manifest"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/server/api"
)

// A session created with a manifest starts with what it lists, its
// host sources taken from under the tenant's base only; the server makes
// the workspace and removes it with the session.
func TestASessionStartsFromAnUntrustedManifest(t *testing.T) {
	base := t.TempDir()
	if err := os.WriteFile(filepath.Join(base, "ledger.csv"), []byte("id,amount\n1,100\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(base, "statements"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, "statements", "jan.txt"), []byte("january\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ts := newTestServer(t, Config{Defaults: Limits{HostBase: base}})
	tok := ts.key(t, "acme")
	m := &manifest.Manifest{
		Entries: map[string]manifest.Entry{
			"task.md":    {File: &manifest.File{Content: "reconcile\n"}},
			"ledger.csv": {LocalFile: &manifest.LocalFile{Src: filepath.Join(base, "ledger.csv")}},
			"in":         {Mount: &manifest.Mount{Src: filepath.Join(base, "statements")}},
		},
		Env: map[string]string{"CLIENT": "acme"},
	}
	var s api.Session
	ts.ok(t, tok, "POST", "/v1/sessions", api.CreateSession{Manifest: m}, http.StatusCreated, &s)
	var res api.ExecResult
	ts.ok(t, tok, "POST", "/v1/sessions/"+s.ID+"/exec", api.Exec{Cmd: []string{"sh", "-c",
		`cat task.md ledger.csv in/jan.txt; echo "$CLIENT"; echo out > report.txt && echo wrote; echo x > in/new 2>/dev/null || echo in is read-only`}},
		http.StatusOK, &res)
	want := "reconcile\nid,amount\n1,100\njanuary\nacme\nwrote\nin is read-only\n"
	if got := string(res.Stdout); got != want || res.ExitCode != 0 {
		t.Fatalf("the session sees %q (exit %d, stderr %q), want %q", got, res.ExitCode, res.Stderr, want)
	}
	workspaces := filepath.Join(ts.data, "tenants", "acme", "workspaces")
	made, err := os.ReadDir(workspaces)
	if err != nil || len(made) != 1 {
		t.Fatalf("the server's workspaces for acme: %v, %v; want the one it made", made, err)
	}
	ts.ok(t, tok, "DELETE", "/v1/sessions/"+s.ID, nil, http.StatusNoContent, nil)
	if left, _ := os.ReadDir(workspaces); len(left) != 0 {
		t.Fatalf("deleting the session left its workspace behind: %v", left)
	}
}

func TestAnUntrustedManifestThatReachesTooFarCreatesNothing(t *testing.T) {
	base := t.TempDir()
	ts := newTestServer(t, Config{Defaults: Limits{HostBase: base}})
	tok := ts.key(t, "acme")
	noBase := newTestServer(t, Config{})
	tokNoBase := noBase.key(t, "acme")
	for _, tc := range []struct {
		name  string
		ts    *testServer
		tok   string
		req   api.CreateSession
		kind  string
		words []string
	}{
		{"a grant", ts, tok, api.CreateSession{Manifest: &manifest.Manifest{
			Entries: map[string]manifest.Entry{"x": {File: &manifest.File{Content: "x"}}},
			Grants:  []manifest.Grant{{Path: "/etc", ReadOnly: true}}}}, api.KindInvalid, []string{"grant", "/etc"}},
		{"a file outside the base", ts, tok, api.CreateSession{Manifest: &manifest.Manifest{
			Entries: map[string]manifest.Entry{"passwd": {LocalFile: &manifest.LocalFile{Src: "/etc/passwd"}}}}}, api.KindPathEscape, []string{"/etc/passwd", base}},
		{"a mount outside the base", ts, tok, api.CreateSession{Manifest: &manifest.Manifest{
			Entries: map[string]manifest.Entry{"root": {Mount: &manifest.Mount{Src: "/root"}}}}}, api.KindPathEscape, []string{"/root"}},
		{"any host source where the operator set no base", noBase, tokNoBase, api.CreateSession{Manifest: &manifest.Manifest{
			Entries: map[string]manifest.Entry{"passwd": {LocalFile: &manifest.LocalFile{Src: "/etc/passwd"}}}}}, api.KindPathEscape, []string{"/etc/passwd"}},
		{"a manifest and a workspace", ts, tok, api.CreateSession{Spec: sandbox.Spec{Workspace: base}, Manifest: &manifest.Manifest{}}, api.KindInvalid, []string{"spec.workspace"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.ts.refused(t, tc.tok, "POST", "/v1/sessions", tc.req, http.StatusBadRequest, tc.kind, tc.words...)
			if n := tc.ts.sessionCount(t, tc.tok); n != 0 {
				t.Fatalf("a refused manifest created %d sessions", n)
			}
			if left, _ := os.ReadDir(filepath.Join(tc.ts.data, "tenants", "acme", "workspaces")); len(left) != 0 {
				t.Fatalf("a refused manifest left workspaces: %v", left)
			}
		})
	}
}
