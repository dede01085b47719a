package linux

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/snapshot"
)

// A snapshot restored from the real store (which writes as this process,
// root) into a directory someone else owns belongs to that owner, so the
// session, whose user the idmapped workspace maps to the owner, can write
// what was restored.
func TestASnapshotRestoredIntoAnOwnedDirectoryIsTheOwners(t *testing.T) {
	store, err := snapshot.Open(t.TempDir(), snapshot.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	c := newTestClientWith(t, Options{StateDir: t.TempDir(), Snapshots: store})
	ctx := context.Background()
	src := newTestSession(t, c, sandbox.Spec{})
	if err := src.WriteFile(ctx, "d/f", []byte("v1"), 0o644); err != nil {
		t.Fatal(err)
	}
	ref, err := src.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	top := t.TempDir()
	if err := os.Chmod(top, 0o755); err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(top, "ws")
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(ws, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	s := newTestSession(t, c, sandbox.Spec{Workspace: ws, Snapshot: ref})
	if res := run(t, s, "sh", "-c", "echo v2 > d/f && cat d/f"); res.ExitCode != 0 || string(res.Stdout) != "v2\n" {
		t.Fatalf("the session could not write the restored file: exit %d, %q %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	for _, p := range []string{".", "d", "d/f"} {
		fi, err := os.Lstat(filepath.Join(ws, p))
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != 4242 || st.Gid != 4242 {
			t.Errorf("%s is owned by %d:%d on the host, want the directory's owner 4242:4242", p, st.Uid, st.Gid)
		}
	}
}
