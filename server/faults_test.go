package server

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A client that goes away in the middle of a run-to-completion exec takes
// its command with it (only a stream started with detach=1 outlives its
// client; see TestADetachedProcessOutlivesItsClientAndIsReattached).
func TestAnExecWhoseClientGoesAwayIsKilled(t *testing.T) {
	ts := newTestServer(t, Config{})
	tok := ts.key(t, "acme")
	s := ts.createSession(t, tok)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "POST", ts.url+"/v1/sessions/"+s.ID+"/exec", strings.NewReader(`{"cmd": ["sleep", "4343"]}`))
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(ts.processes(t, tok, s.ID), "sleep 4343") {
		if time.Now().After(deadline) {
			t.Fatal("the command never ran")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the exec answered although its client went away")
	}
	deadline = time.Now().Add(10 * time.Second)
	for strings.Contains(ts.processes(t, tok, s.ID), "sleep 4343") {
		if time.Now().After(deadline) {
			t.Fatal("the command still runs 10s after its client went away")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
