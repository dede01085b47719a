package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/linux"
	"github.com/agentbox/agentbox/server/api"
)

// testServer is a server on the linux backend behind httptest, with its
// data directory and backend state in the test's temporary directories.
type testServer struct {
	*Server
	url  string
	data string
}

// linuxBackend is the linux backend with its state under stateDir, or a
// skip where it cannot run.
func linuxBackend(t testing.TB, stateDir string) NewBackend {
	t.Helper()
	testenv.NeedRoot(t, "the linux backend")
	if _, err := linux.New(linux.Options{StateDir: stateDir}); err != nil {
		testenv.Skipf(t, "linux backend unavailable: %v", err)
	}
	return func(_ string, store sandbox.SnapshotStore) (sandbox.Client, error) {
		return linux.New(linux.Options{StateDir: stateDir, Snapshots: store, Logger: quiet()})
	}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newTestServer starts a server on the linux backend with cfg; its
// sessions are deleted when the test ends.
func newTestServer(t *testing.T, cfg Config) *testServer {
	t.Helper()
	data := t.TempDir()
	return startServer(t, data, linuxBackend(t, t.TempDir()), cfg)
}

func startServer(t *testing.T, data string, b NewBackend, cfg Config) *testServer {
	t.Helper()
	s, err := New(context.Background(), Options{Data: data, Backend: b, Config: cfg, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		hs.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.Close(ctx, true); err != nil {
			t.Errorf("close the server: %v", err)
		}
	})
	return &testServer{Server: s, url: hs.URL, data: data}
}

// key makes an API key for tenant.
func (ts *testServer) key(t *testing.T, tenant string) string {
	t.Helper()
	_, tok, err := ts.reg.CreateKey(tenant)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// call is one request with key tok (none when empty); body is JSON unless
// it is a []byte or string.
func (ts *testServer) call(t *testing.T, tok, method, path string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, ts.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out
}

// ok is call that wants status want and decodes the answer into out
// (when not nil).
func (ts *testServer) ok(t *testing.T, tok, method, path string, body any, want int, out any) {
	t.Helper()
	status, data := ts.call(t, tok, method, path, body)
	if status != want {
		t.Fatalf("%s %s: status %d, want %d: %s", method, path, status, want, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, path, data, err)
		}
	}
}

// refused is call that wants status want and an error body whose kind is
// kind and whose message contains each of words.
func (ts *testServer) refused(t *testing.T, tok, method, path string, body any, want int, kind string, words ...string) {
	t.Helper()
	status, data := ts.call(t, tok, method, path, body)
	var e api.Error
	if status != want || json.Unmarshal(data, &e) != nil || e.Error.Kind != kind {
		t.Fatalf("%s %s: status %d %s, want %d of kind %s", method, path, status, data, want, kind)
	}
	for _, w := range words {
		if !strings.Contains(e.Error.Message, w) {
			t.Errorf("%s %s: message %q does not say %q", method, path, e.Error.Message, w)
		}
	}
}

// createSession makes a session with an empty spec.
func (ts *testServer) createSession(t *testing.T, tok string) api.Session {
	t.Helper()
	var s api.Session
	ts.ok(t, tok, "POST", "/v1/sessions", api.CreateSession{}, http.StatusCreated, &s)
	return s
}

// sessionCount is how many sessions tok's tenant lists.
func (ts *testServer) sessionCount(t *testing.T, tok string) int {
	t.Helper()
	var l api.SessionList
	ts.ok(t, tok, "GET", "/v1/sessions", nil, http.StatusOK, &l)
	return len(l.Sessions)
}

func sprintf(format, id string) string { return strings.Replace(format, "%s", id, 1) }

func replaceID(s, from, to string) string { return strings.ReplaceAll(s, from, to) }

// try is ok for a goroutine: it returns what went wrong instead of
// failing the test.
func (ts *testServer) try(tok, method, path string, body any, want int, out any) error {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, ts.url+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: status %d, want %d: %s", method, path, resp.StatusCode, want, data)
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}
