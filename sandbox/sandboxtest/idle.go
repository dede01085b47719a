package sandboxtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentbox/agentbox/sandbox"
)

func idleTests() []testCase {
	return []testCase{
		{name: "claimed resources.idle_timeout: a running command and Extend keep a session, idleness ends it", run: testPartIdle},
	}
}

func testPartIdle(t *testing.T, s *suite) {
	claims(t, s, sandbox.PartIdleTimeout)
	const idle = time.Second
	_, sess := s.session(t, func(sp *sandbox.Spec) { sp.Policy.Resources.IdleTimeout = idle })
	shOK(t, sess, "sleep 2") // twice the idle timeout, running
	for range 5 {
		time.Sleep(400 * time.Millisecond)
		if err := sandbox.Extend(ctx(t), sess); err != nil {
			t.Fatalf("Extend: %v", err)
		}
	}
	shOK(t, sess, "true")
	time.Sleep(idle + 1500*time.Millisecond)
	_, err := sandbox.Exec(context.Background(), sess, sandbox.ExecRequest{Cmd: []string{"true"}})
	if err == nil {
		t.Fatalf("a command ran in a session idle for %s past its idle timeout of %s", 1500*time.Millisecond, idle)
	}
	if !errors.Is(err, sandbox.ErrGone) {
		t.Fatalf("a command in a session ended by its idle timeout: err = %v, want ErrGone", err)
	}
}
