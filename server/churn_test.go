package server

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox/agentbox/server/api"
)

// TestChurnThroughTheServerLeavesNothing creates, uses and deletes 1,000
// sessions through the HTTP API, 8 clients at a time, then checks that
// none failed and that nothing is left: no init, cgroup, mount, state or
// temporary directory, nor registry row. (Each session's trace is kept on
// purpose: a tenant reads it after the delete.)
func TestChurnThroughTheServerLeavesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping 1,000 sessions")
	}
	state := t.TempDir()
	ts := startServer(t, t.TempDir(), linuxBackend(t, state), Config{})
	tok := ts.key(t, "acme")
	const clients, each = 8, 125
	var (
		mu  sync.Mutex
		ids []string
		wg  sync.WaitGroup
	)
	errs := make(chan error, clients*each)
	for c := range clients {
		wg.Go(func() {
			for i := range each {
				if err := ts.churnOne(tok, &mu, &ids); err != nil {
					errs <- fmt.Errorf("client %d, session %d: %w", c, i, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	failed := 0
	for err := range errs {
		if failed++; failed <= 10 {
			t.Error(err)
		}
	}
	if failed > 0 {
		t.Fatalf("%d of %d sessions failed", failed, clients*each)
	}
	if len(ids) != clients*each {
		t.Fatalf("%d sessions made, want %d", len(ids), clients*each)
	}

	if recs, err := ts.reg.Sessions(); err != nil || len(recs) != 0 {
		t.Errorf("registry rows left: %d (%v)", len(recs), err)
	}
	if n := ts.sessionCount(t, tok); n != 0 {
		t.Errorf("the tenant lists %d sessions", n)
	}
	for _, dir := range []string{state, filepath.Join(ts.data, "tenants", "acme", "tmp")} {
		if ents, _ := os.ReadDir(dir); len(ents) > 0 {
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			t.Errorf("%s not empty: %v", dir, names)
		}
	}
	mine := regexp.MustCompile(`\bid=(` + strings.Join(ids, "|") + `)\b`)
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, _ := os.ReadFile(p)
		if cmd := strings.ReplaceAll(string(b), "\x00", " "); mine.MatchString(cmd) {
			t.Errorf("an init outlived its session: %s: %s", filepath.Dir(p), cmd)
		}
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(mounts), "\n") {
		if strings.Contains(line, state) || strings.Contains(line, ts.data) {
			t.Errorf("mount left behind: %s", line)
		}
	}
	for _, id := range ids {
		for _, pattern := range []string{"/sys/fs/cgroup/*/agentbox/" + id, "/sys/fs/cgroup/agentbox/" + id} {
			if m, _ := filepath.Glob(pattern); len(m) > 0 {
				t.Errorf("cgroup left behind: %v", m)
			}
		}
	}
}

// churnOne creates a session, runs a command and writes a file in it, and
// deletes it, recording its id.
func (ts *testServer) churnOne(tok string, mu *sync.Mutex, ids *[]string) error {
	var s api.Session
	if err := ts.try(tok, "POST", "/v1/sessions", api.CreateSession{}, http.StatusCreated, &s); err != nil {
		return fmt.Errorf("create: %w", err)
	}
	mu.Lock()
	*ids = append(*ids, s.ID)
	mu.Unlock()
	var res api.ExecResult
	xerr := ts.try(tok, "POST", "/v1/sessions/"+s.ID+"/exec", api.Exec{Cmd: []string{"true"}}, http.StatusOK, &res)
	if err := ts.try(tok, "DELETE", "/v1/sessions/"+s.ID, nil, http.StatusNoContent, nil); err != nil {
		return fmt.Errorf("delete %s: %w", s.ID, err)
	}
	if xerr != nil {
		return fmt.Errorf("exec in %s: %w", s.ID, xerr)
	}
	return nil
}
