package sandboxtest

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/sandbox"
)

func lifecycleTests() []testCase {
	return []testCase{
		{name: "Close is idempotent and a closed session refuses exec", run: testClose},
		{name: "State round-trips, Resume reattaches and Rebuild makes a new session with the same files", needs: CapResume, run: testResume},
		{name: "Delete removes an owned workspace and deleting twice is not an error", run: testDelete},
		{name: "a snapshot seeds a new session and rebuilds a lost workspace", run: testSnapshot},
		{name: "a snapshot holds no more than its session's disk limit", run: testSnapshotBound},
	}
}

func testClose(t *testing.T, s *suite) {
	c := s.client(t)
	sess, err := c.Create(ctx(t), s.spec(t))
	if err != nil {
		t.Fatal(err)
	}
	shOK(t, sess, "true")
	for i := range 2 {
		if err := sess.Close(ctx(t)); err != nil {
			t.Fatalf("close #%d: %v", i+1, err)
		}
	}
	if _, err := sandbox.Exec(ctx(t), sess, sandbox.ExecRequest{Cmd: []string{"true"}}); !errors.Is(err, sandbox.ErrClosed) {
		t.Fatalf("exec after close: err = %v, want ErrClosed", err)
	} else if msg := err.Error(); !strings.Contains(msg, sess.ID()) || !strings.Contains(msg, "closed") {
		// A bare "exec: session ID" leaves the reader to guess.
		t.Fatalf("exec after close: %q does not say that session %s is closed", msg, sess.ID())
	}
	if _, err := sess.Start(ctx(t), sandbox.ExecRequest{Cmd: []string{"true"}}); !errors.Is(err, sandbox.ErrClosed) {
		t.Fatalf("start after close: err = %v, want ErrClosed", err)
	}
}

func testResume(t *testing.T, s *suite) {
	c, sess := s.session(t)
	cx := ctx(t)
	if err := sess.WriteFile(cx, "kept/state.txt", []byte("survives"), 0o644); err != nil {
		t.Fatal(err)
	}
	st := sess.State()
	if st.Version != sandbox.StateVersion || st.Backend != c.Name() || st.ID != sess.ID() {
		t.Fatalf("State() = version %d backend %q id %q; want %d %q %q", st.Version, st.Backend, st.ID, sandbox.StateVersion, c.Name(), sess.ID())
	}
	data, err := sandbox.MarshalState(st)
	if err != nil {
		t.Fatal(err)
	}
	back, err := sandbox.UnmarshalState(data)
	if err != nil {
		t.Fatalf("unmarshal the marshalled state: %v\n%s", err, data)
	}
	if back.ID != st.ID || back.Backend != st.Backend || back.Workspace != st.Workspace || back.OwnsWorkspace != st.OwnsWorkspace {
		t.Fatalf("state changed in the round trip:\n%+v\n%+v", st, back)
	}
	// A fresh client, as another process would have, reattaches to the
	// live session: the same session, the same files.
	c2 := s.client(t)
	resumed, err := c2.Resume(cx, back)
	if err != nil {
		t.Fatalf("resume a live session: %v", err)
	}
	if resumed.ID() != sess.ID() {
		t.Fatalf("Resume of a live session gave session %s, want %s", resumed.ID(), sess.ID())
	}
	if res := shOK(t, resumed, "cat kept/state.txt"); string(res.Stdout) != "survives" {
		t.Fatalf("a command in the resumed session read %q", res.Stdout)
	}
	if _, err := c2.Rebuild(cx, back); !errors.Is(err, sandbox.ErrInvalid) {
		t.Fatalf("Rebuild of a live session: err = %v, want ErrInvalid", err)
	}

	if err := sess.Stop(cx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	// After Stop a backend either reattaches (one that keeps a stopped
	// sandbox) or says the sandbox is gone; then Rebuild makes a new
	// session, under a new id, with the same files.
	again, err := s.client(t).Resume(cx, back)
	switch {
	case err == nil:
		closeAtEnd(t, again)
		if again.ID() != sess.ID() {
			t.Fatalf("Resume after Stop gave session %s, want %s or ErrGone", again.ID(), sess.ID())
		}
		return
	case !errors.Is(err, sandbox.ErrGone):
		t.Fatalf("resume after stop: err = %v, want success or ErrGone", err)
	}
	rebuilt, err := s.client(t).Rebuild(cx, back)
	if err != nil {
		t.Fatalf("rebuild after stop: %v", err)
	}
	closeAtEnd(t, rebuilt)
	if rebuilt.ID() == sess.ID() {
		t.Fatalf("Rebuild kept the id %s; a rebuilt session is a new one", rebuilt.ID())
	}
	got, err := rebuilt.ReadFile(cx, "kept/state.txt")
	if err != nil || string(got) != "survives" {
		t.Fatalf("rebuilt ReadFile = %q, %v", got, err)
	}
	if res := shOK(t, rebuilt, "cat kept/state.txt"); string(res.Stdout) != "survives" {
		t.Fatalf("a command in the rebuilt session read %q", res.Stdout)
	}
}

func testSnapshot(t *testing.T, s *suite) {
	if s.cfg.snapshots == nil {
		t.Skip("no snapshot store given (sandboxtest.WithSnapshots)")
	}
	c := s.client(t)
	cx := ctx(t)
	// A workspace the backend owns, so that Close removes it.
	owned := func(sp *sandbox.Spec) { sp.Workspace = "" }
	sess, err := c.Create(cx, s.spec(t, owned))
	if err != nil {
		t.Fatal(err)
	}
	closeAtEnd(t, sess)
	if err := sess.WriteFile(cx, "snap/data.txt", []byte("v1"), 0o640); err != nil {
		t.Fatal(err)
	}
	shOK(t, sess, "mkdir -p made && echo by-cmd > made/f")
	ref, err := sess.Snapshot(cx)
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	if ref == "" || sess.State().Snapshot != ref {
		t.Fatalf("snapshot ref %q, State().Snapshot %q", ref, sess.State().Snapshot)
	}
	if err := sess.WriteFile(cx, "snap/data.txt", []byte("v2 after the snapshot"), 0o640); err != nil {
		t.Fatal(err)
	}

	seeded, err := c.Create(cx, s.spec(t, func(sp *sandbox.Spec) { sp.Snapshot = ref }))
	if err != nil {
		t.Fatalf("create from snapshot: %v", err)
	}
	closeAtEnd(t, seeded)
	checkSnapshotFiles(t, seeded)

	if _, ok := s.cfg.skips[CapResume]; ok {
		return
	}
	st := sess.State()
	if err := sess.Close(cx); err != nil {
		t.Fatal(err)
	}
	if st.OwnsWorkspace && st.Workspace != "" {
		if _, err := os.Stat(st.Workspace); err == nil {
			t.Fatalf("Close left the workspace %s it created", st.Workspace)
		}
	}
	if _, err := s.client(t).Resume(cx, st); !errors.Is(err, sandbox.ErrGone) {
		t.Fatalf("resume after Close: err = %v, want ErrGone", err)
	}
	rebuilt, err := s.client(t).Rebuild(cx, st)
	if err != nil {
		t.Fatalf("rebuild after the workspace is gone: %v", err)
	}
	closeAtEnd(t, rebuilt)
	checkSnapshotFiles(t, rebuilt)
}

// testSnapshotBound: sparse files let a session of a small disk limit
// make files of far larger apparent size; its snapshot is refused,
// naming the limit, rather than stored (and later restored) at that size.
func testSnapshotBound(t *testing.T, s *suite) {
	if s.cfg.snapshots == nil {
		t.Skip("no snapshot store given (sandboxtest.WithSnapshots)")
	}
	c := s.client(t)
	if !slices.Contains(c.Enforces(), sandbox.PartDisk) {
		t.Skipf("the %s backend enforces no disk limit here", c.Name())
	}
	sess, err := c.Create(ctx(t), s.spec(t, func(sp *sandbox.Spec) {
		sp.Workspace = ""
		sp.Policy.Resources.DiskBytes = 64 << 20
	}))
	if err != nil {
		t.Fatal(err)
	}
	closeAtEnd(t, sess)
	shOK(t, sess, "truncate -s 60M a b c")
	ref, err := sess.Snapshot(ctx(t))
	if err == nil {
		t.Fatalf("a session of 64 MiB saved snapshot %s of 180 MiB of files", ref)
	}
	if !errors.Is(err, sandbox.ErrInvalid) || !strings.Contains(err.Error(), "disk limit") {
		t.Errorf("the refusal %q does not name the disk limit", err)
	}
}

func checkSnapshotFiles(t *testing.T, sess sandbox.Session) {
	t.Helper()
	cx := ctx(t)
	got, err := sess.ReadFile(cx, "snap/data.txt")
	if err != nil || string(got) != "v1" {
		t.Fatalf("snap/data.txt = %q, %v; want the snapshot's v1", got, err)
	}
	res := shOK(t, sess, "cat made/f")
	if string(res.Stdout) != "by-cmd\n" {
		t.Fatalf("made/f = %q", res.Stdout)
	}
	list, err := sess.ListDir(cx, "snap")
	if err != nil || len(list) != 1 || list[0].Mode.Perm() != 0o640 {
		t.Fatalf("ListDir(snap) = %+v, %v; want data.txt with mode 0640", list, err)
	}
}

func testDelete(t *testing.T, s *suite) {
	c := s.client(t)
	cx := ctx(t)
	sess, err := c.Create(cx, s.spec(t, func(sp *sandbox.Spec) { sp.Workspace = "" }))
	if err != nil {
		t.Fatal(err)
	}
	closeAtEnd(t, sess)
	shOK(t, sess, "echo x > f")
	st := sess.State()
	if err := c.Delete(cx, st); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if st.OwnsWorkspace && st.Workspace != "" {
		if _, err := os.Stat(st.Workspace); err == nil {
			t.Errorf("Delete left the owned workspace %s", st.Workspace)
		}
	}
	if err := c.Delete(cx, st); err != nil {
		t.Fatalf("deleting what is already gone: %v", err)
	}
	if err := s.client(t).Delete(cx, st); err != nil {
		t.Fatalf("deleting what is already gone, from another client: %v", err)
	}
}
