package server

import (
	"context"
	"encoding/json"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/server/api"
)

// killSandbox kills a linux session's init from outside, as an operator
// or the OOM killer might.
func (ts *testServer) killSandbox(t *testing.T, tenant, id string) {
	t.Helper()
	tn, err := ts.tenant(tenant)
	if err != nil {
		t.Fatal(err)
	}
	l, err := tn.lookup(id)
	if err != nil {
		t.Fatal(err)
	}
	var h struct {
		InitPID int `json:"init_pid"`
	}
	if err := json.Unmarshal(l.rec.State.Handles, &h); err != nil || h.InitPID <= 1 {
		t.Fatalf("init pid of %s: %v", id, err)
	}
	if err := syscall.Kill(h.InitPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for syscall.Kill(h.InitPID, 0) == nil {
		time.Sleep(10 * time.Millisecond)
	}
}

// After the server stops without closing its sessions and another starts
// on the same data directory, every live session is there and usable with
// its files, the same keys work, and a session whose sandbox died
// meanwhile is reported gone, kept until it is deleted.
func TestTheServerFindsItsSessionsAfterARestart(t *testing.T) {
	data, backend := t.TempDir(), linuxBackend(t, t.TempDir())
	first := startServer(t, data, backend, Config{})
	tok := first.key(t, "acme")
	kept, killed := first.createSession(t, tok), first.createSession(t, tok)
	first.ok(t, tok, "PUT", "/v1/sessions/"+kept.ID+"/files?path=kept.txt", "still here", http.StatusNoContent, nil)
	first.killSandbox(t, "acme", killed.ID)
	if err := first.Close(context.Background(), false); err != nil {
		t.Fatal(err)
	}

	second := startServer(t, data, backend, Config{})
	var got api.Session
	second.ok(t, tok, "GET", "/v1/sessions/"+kept.ID, nil, http.StatusOK, &got)
	if got.Status != api.StatusRunning {
		t.Fatalf("the live session is %s after the restart", got.Status)
	}
	var res api.ExecResult
	second.ok(t, tok, "POST", "/v1/sessions/"+kept.ID+"/exec", api.Exec{Cmd: []string{"cat", "kept.txt"}}, http.StatusOK, &res)
	if string(res.Stdout) != "still here" {
		t.Fatalf("after the restart the session reads %q", res.Stdout)
	}
	second.ok(t, tok, "GET", "/v1/sessions/"+killed.ID, nil, http.StatusOK, &got)
	if got.Status != api.StatusGone {
		t.Fatalf("the killed session is %s after the restart, want gone", got.Status)
	}
	second.refused(t, tok, "POST", "/v1/sessions/"+killed.ID+"/exec", api.Exec{Cmd: []string{"true"}}, http.StatusGone, api.KindGone, "rebuild")
	second.ok(t, tok, "DELETE", "/v1/sessions/"+killed.ID, nil, http.StatusNoContent, nil)
}

// A sandbox killed from outside under a running server is reported gone
// at the first request that finds it so, and can be rebuilt with its
// files.
func TestASandboxKilledUnderTheServerIsReportedGone(t *testing.T) {
	ts := newTestServer(t, Config{})
	tok := ts.key(t, "acme")
	s := ts.createSession(t, tok)
	ts.ok(t, tok, "PUT", "/v1/sessions/"+s.ID+"/files?path=f", "data", http.StatusNoContent, nil)
	ts.killSandbox(t, "acme", s.ID)
	status, body := ts.call(t, tok, "POST", "/v1/sessions/"+s.ID+"/exec", api.Exec{Cmd: []string{"true"}})
	if status != http.StatusGone {
		t.Fatalf("exec in a killed sandbox: %d %s, want 410", status, body)
	}
	var got api.Session
	ts.ok(t, tok, "GET", "/v1/sessions/"+s.ID, nil, http.StatusOK, &got)
	if got.Status != api.StatusGone {
		t.Fatalf("the killed session is %s", got.Status)
	}
	var nb api.Session
	ts.ok(t, tok, "POST", "/v1/sessions/"+s.ID+"/rebuild", nil, http.StatusCreated, &nb)
	status, body = ts.call(t, tok, "GET", "/v1/sessions/"+nb.ID+"/files?path=f", nil)
	if status != http.StatusOK || string(body) != "data" {
		t.Fatalf("the rebuilt session reads %d %q", status, body)
	}
}
