package linux

import (
	"context"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
)

// newTestClient returns a client with its own state directory, or skips
// when the backend cannot run here.
func newTestClient(t testing.TB) *Client {
	t.Helper()
	return newTestClientWith(t, Options{StateDir: t.TempDir()})
}

// newTestClientWith is New(opts) for a test, which is skipped without
// root or where the backend cannot run.
func newTestClientWith(t testing.TB, opts Options) *Client {
	t.Helper()
	testenv.NeedRoot(t, "the linux backend")
	c, err := New(opts)
	if err != nil {
		testenv.Skipf(t, "linux backend unavailable: %v", err)
	}
	return c
}

// newTestSession creates a session and closes it when the test ends.
func newTestSession(t testing.TB, c *Client, spec sandbox.Spec) sandbox.Session {
	t.Helper()
	s, err := c.Create(context.Background(), spec)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(context.Background()); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return s
}

func run(t testing.TB, s sandbox.Session, cmd ...string) sandbox.ExecResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := sandbox.Exec(ctx, s, sandbox.ExecRequest{Cmd: cmd})
	if err != nil {
		t.Fatalf("exec %q: %v", cmd, err)
	}
	return res
}

// mustHandles reads the linux handles of st.
func mustHandles(t testing.TB, st sandbox.State) handles {
	t.Helper()
	h, err := decodeHandles(st)
	if err != nil {
		t.Fatal(err)
	}
	return h
}
