package linux

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
)

// gone reports whether the session's init has ended.
func gone(s sandbox.Session) bool {
	_, err := sandbox.Exec(context.Background(), s, sandbox.ExecRequest{Cmd: []string{"true"}})
	return errors.Is(err, sandbox.ErrGone)
}

func TestTheIdleTimeoutEndsAnIdleSessionOnly(t *testing.T) {
	c := newTestClient(t)
	spec := sandbox.Spec{Policy: sandbox.Policy{Resources: sandbox.Resources{IdleTimeout: time.Second}}}

	t.Run("a running command and Extend keep it", func(t *testing.T) {
		s := newTestSession(t, c, spec)
		run(t, s, "sleep", "2") // twice the idle timeout, running
		for range 6 {
			time.Sleep(400 * time.Millisecond)
			if err := sandbox.Extend(context.Background(), s); err != nil {
				t.Fatal(err)
			}
		}
		if gone(s) {
			t.Fatal("the session ended while it was used")
		}
	})
	t.Run("idle, it ends", func(t *testing.T) {
		s := newTestSession(t, c, spec)
		run(t, s, "true")
		// A status probe (Resume, session ls) is no use of it.
		deadline := time.Now().Add(10 * time.Second)
		for initAlive(s.(*session).h.InitPID, s.ID()) {
			if time.Now().After(deadline) {
				t.Fatal("an idle session still ran 10 s into an idle timeout of 1 s")
			}
			if _, err := c.Resume(context.Background(), s.State()); err != nil && !errors.Is(err, sandbox.ErrGone) {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if !gone(s) {
			t.Fatal("a command started in a session past its idle timeout")
		}
	})
	t.Run("a paused session's idle clock starts again at unpause", func(t *testing.T) {
		s := newTestSession(t, c, spec)
		if err := sandbox.Pause(context.Background(), s); errors.Is(err, sandbox.ErrUnsupported) {
			testenv.NeedKernel(t, "a cgroup2 group to freeze", err)
		} else if err != nil {
			t.Fatal(err)
		}
		time.Sleep(2500 * time.Millisecond)
		if err := sandbox.Unpause(context.Background(), s); err != nil {
			t.Fatal(err)
		}
		if _, err := sandbox.Exec(context.Background(), s, sandbox.ExecRequest{Cmd: []string{"true"}}); err != nil {
			t.Fatalf("a command just after unpause: %v", err)
		}
	})
}
