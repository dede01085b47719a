package sandboxtest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/sandbox"
)

func watchTests() []testCase {
	return []testCase{
		{name: "a watcher sees the files the sandbox writes, renames and removes", run: testWatch},
		{name: "a watch ends when its session closes", run: testWatchEndsWithSession},
	}
}

// nextEvent reads events from ch until one matches want's Op, Path and
// OldPath, and fails after a few seconds or when the watch ends.
func nextEvent(t *testing.T, ch <-chan sandbox.WatchEvent, want sandbox.WatchEvent) []sandbox.WatchEvent {
	t.Helper()
	var seen []sandbox.WatchEvent
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("the watch ended before %s %s; saw %+v", want.Op, want.Path, seen)
			}
			if ev.Op == want.Op && ev.Path == want.Path && ev.OldPath == want.OldPath {
				return seen
			}
			seen = append(seen, ev)
		case <-timeout:
			t.Fatalf("no %s %s (from %q) in 10 s; saw %+v", want.Op, want.Path, want.OldPath, seen)
		}
	}
}

func testWatch(t *testing.T, s *suite) {
	_, sess := s.session(t)
	if why, ok := s.cfg.skips[CapWatch]; ok {
		if _, err := sandbox.Watch(ctx(t), sess, "."); !errors.Is(err, sandbox.ErrUnsupported) {
			t.Fatalf("Watch where the backend cannot watch (%s): err = %v, want ErrUnsupported", why, err)
		}
		return
	}
	shOK(t, sess, "mkdir -p src")
	ch, err := sandbox.Watch(ctx(t), sess, ".")
	if err != nil {
		t.Fatal(err)
	}
	shOK(t, sess, "echo hello > src/made.txt")
	nextEvent(t, ch, sandbox.WatchEvent{Op: sandbox.WatchCreate, Path: "src/made.txt"})
	nextEvent(t, ch, sandbox.WatchEvent{Op: sandbox.WatchWrite, Path: "src/made.txt"})
	shOK(t, sess, "mv src/made.txt src/moved.txt")
	nextEvent(t, ch, sandbox.WatchEvent{Op: sandbox.WatchRename, Path: "src/moved.txt", OldPath: "src/made.txt"})
	shOK(t, sess, "rm src/moved.txt")
	nextEvent(t, ch, sandbox.WatchEvent{Op: sandbox.WatchRemove, Path: "src/moved.txt"})
	// A directory made after the watch began is followed too.
	shOK(t, sess, "mkdir -p new/deeper && echo x > new/deeper/f")
	nextEvent(t, ch, sandbox.WatchEvent{Op: sandbox.WatchCreate, Path: "new/deeper/f"})

	// A watch of a subdirectory reports only what happens under it.
	sub, err := sandbox.Watch(ctx(t), sess, "src")
	if err != nil {
		t.Fatal(err)
	}
	shOK(t, sess, "echo x > outside.txt; echo y > src/inside.txt")
	for _, ev := range nextEvent(t, sub, sandbox.WatchEvent{Op: sandbox.WatchCreate, Path: "src/inside.txt"}) {
		if !strings.HasPrefix(ev.Path, "src/") {
			t.Fatalf("a watch of src reported %+v", ev)
		}
	}
	if _, err := sandbox.Watch(ctx(t), sess, "../.."); !errors.Is(err, sandbox.ErrPathEscape) {
		t.Fatalf("a watch of a path out of the workspace: err = %v, want ErrPathEscape", err)
	}
}

func testWatchEndsWithSession(t *testing.T, s *suite) {
	if _, ok := s.cfg.skips[CapWatch]; ok {
		return // testWatch checks the refusal
	}
	c := s.client(t)
	sess, err := c.Create(ctx(t), s.spec(t))
	if err != nil {
		t.Fatal(err)
	}
	ch, err := sandbox.Watch(context.Background(), sess, ".")
	if err != nil {
		_ = sess.Close(ctx(t))
		t.Fatal(err)
	}
	if err := sess.Close(ctx(t)); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-timeout:
			t.Fatal("the watch went on for 10 s after its session closed")
		}
	}
}
