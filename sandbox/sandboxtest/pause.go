package sandboxtest

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/sandbox"
)

func pauseTests() []testCase {
	return []testCase{
		{name: "a paused session makes no progress, refuses commands, and continues where it stood", run: testPause},
		{name: "a paused session closes", run: testPausedClose},
	}
}

// counter starts a loop that writes an ever larger number to
// /workspace/n, and waits until it has counted a little.
func counter(t *testing.T, sess sandbox.Session) sandbox.Process {
	t.Helper()
	p, err := sess.Start(ctx(t), sandbox.ExecRequest{Cmd: []string{"sh", "-c", `i=0; while :; do i=$((i+1)); echo $i > n.tmp; mv n.tmp n; done`}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Kill(context.Background()); _ = p.Close() })
	deadline := time.Now().Add(10 * time.Second)
	for count(t, sess) < 10 {
		if time.Now().After(deadline) {
			t.Fatal("the counter never counted to 10")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return p
}

func count(t *testing.T, sess sandbox.Session) int {
	t.Helper()
	b, err := sess.ReadFile(ctx(t), "n")
	if errors.Is(err, sandbox.ErrNotFound) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

func testPause(t *testing.T, s *suite) {
	_, sess := s.session(t)
	if why, ok := s.cfg.skips[CapPause]; ok {
		if err := sandbox.Pause(ctx(t), sess); !errors.Is(err, sandbox.ErrUnsupported) {
			t.Fatalf("Pause where the backend cannot pause (%s): err = %v, want ErrUnsupported", why, err)
		}
		return
	}
	counter(t, sess)
	if err := sandbox.Pause(ctx(t), sess); err != nil {
		t.Fatal(err)
	}
	if err := sandbox.Pause(ctx(t), sess); err != nil {
		t.Fatalf("pausing a paused session: %v", err)
	}
	if paused, err := sandbox.Paused(ctx(t), sess); err != nil || !paused {
		t.Fatalf("Paused = %v, %v after Pause", paused, err)
	}
	at := count(t, sess)
	time.Sleep(300 * time.Millisecond)
	if now := count(t, sess); now != at {
		t.Fatalf("the counter went from %d to %d while paused", at, now)
	}
	if _, err := sess.Start(ctx(t), sandbox.ExecRequest{Cmd: []string{"true"}}); !errors.Is(err, sandbox.ErrPaused) {
		t.Fatalf("Start in a paused session: err = %v, want ErrPaused", err)
	}
	if err := sandbox.Unpause(ctx(t), sess); err != nil {
		t.Fatal(err)
	}
	if paused, err := sandbox.Paused(ctx(t), sess); err != nil || paused {
		t.Fatalf("Paused = %v, %v after Unpause", paused, err)
	}
	// The loop kept its memory: it goes on from where it stood, not from 1.
	deadline := time.Now().Add(10 * time.Second)
	for {
		now := count(t, sess)
		if now > at {
			break
		}
		if now < at && now != 0 {
			t.Fatalf("the counter restarted: %d after %d", now, at)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the counter stood at %d after Unpause", now)
		}
		time.Sleep(10 * time.Millisecond)
	}
	shOK(t, sess, "true")
}

func testPausedClose(t *testing.T, s *suite) {
	c := s.client(t)
	sess, err := c.Create(ctx(t), s.spec(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.cfg.skips[CapPause]; ok {
		if err := sess.Close(ctx(t)); err != nil {
			t.Fatal(err)
		}
		return
	}
	counter(t, sess)
	if err := sandbox.Pause(ctx(t), sess); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- sess.Close(context.Background()) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("close of a paused session: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("close of a paused session did not return in 30 s")
	}
}
