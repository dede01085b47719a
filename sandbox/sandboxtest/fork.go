package sandboxtest

import (
	"errors"
	"testing"
	"time"

	"github.com/agentbox/agentbox/sandbox"
)

func forkTests() []testCase {
	return []testCase{
		{name: "a fork of a paused session has its files as they stood, its own workspace, and none of its processes", run: testFork},
	}
}

func testFork(t *testing.T, s *suite) {
	c, sess := s.session(t)
	if s.cfg.snapshots == nil {
		if _, err := sandbox.Fork(ctx(t), c, sess); err == nil {
			t.Fatal("Fork with a client that has no snapshot store succeeded")
		}
		return
	}
	shOK(t, sess, "echo kept > keep.txt")
	counter(t, sess)
	_, canPause := s.cfg.skips[CapPause]
	canPause = !canPause
	if canPause {
		if err := sandbox.Pause(ctx(t), sess); err != nil {
			t.Fatal(err)
		}
	}
	at := count(t, sess)
	fork, err := sandbox.Fork(ctx(t), c, sess)
	if err != nil {
		t.Fatal(err)
	}
	closeAtEnd(t, fork)
	if fork.ID() == sess.ID() {
		t.Fatalf("the fork has its source's id %s", fork.ID())
	}
	if got := fork.State().Spec.Labels[sandbox.ForkLabel]; got != sess.ID() {
		t.Fatalf("the fork's %s label is %q, want %s", sandbox.ForkLabel, got, sess.ID())
	}
	if b, err := fork.ReadFile(ctx(t), "keep.txt"); err != nil || string(b) != "kept\n" {
		t.Fatalf("the fork's keep.txt: %q, %v", b, err)
	}
	first := count(t, fork)
	if canPause && first != at {
		t.Fatalf("the fork's counter file says %d, the paused source's %d", first, at)
	}
	time.Sleep(300 * time.Millisecond)
	if now := count(t, fork); now != first {
		t.Fatalf("the source's loop runs in the fork: its counter went from %d to %d", first, now)
	}
	shOK(t, fork, "echo mine > fork-only.txt")
	if _, err := sess.ReadFile(ctx(t), "fork-only.txt"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("a file the fork wrote, read in its source: err = %v, want ErrNotFound", err)
	}
	if !canPause {
		return
	}
	if paused, err := sandbox.Paused(ctx(t), sess); err != nil || !paused {
		t.Fatalf("the source is not paused after the fork: %v, %v", paused, err)
	}
	if err := sandbox.Unpause(ctx(t), sess); err != nil {
		t.Fatal(err)
	}
	shOK(t, sess, "true")
}
