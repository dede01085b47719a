package escapetest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/linux"
	"github.com/agentbox/agentbox/snapshot"
)

// TestSmugglingHostFilesThroughASnapshotFails plants links to host files
// (and a FIFO to hang the saver) in a workspace, snapshots it (the save
// runs on the host, as root) and restores it into a second session,
// which must find no host content.
func TestSmugglingHostFilesThroughASnapshotFails(t *testing.T) {
	newClient(t) // root and helper checks
	store, err := snapshot.Open(t.TempDir(), snapshot.Options{Logger: backendLog.logger()})
	if err != nil {
		t.Fatal(err)
	}
	c, err := linux.New(linux.Options{StateDir: stateDir, Snapshots: store, Logger: backendLog.logger()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	planted, want := plantHostSecret(t, "")
	a, err := c.Create(ctx, withHelper(sandbox.Spec{}))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(context.Background())
	r := sh(t, a, "cd /workspace && ln -s "+planted+" abs && ln -s ../../../../../../../.."+planted+" rel && "+
		"ln -s "+filepath.Dir(planted)+" dir && ln -s /etc/shadow shadow && mkfifo fifo && echo mine > own.txt")
	if r.ExitCode != 0 {
		t.Fatalf("plant: %s", r.Stderr)
	}
	ref, err := a.Snapshot(ctx)
	if err != nil {
		t.Logf("the snapshot refused the planted tree: %v", err)
		return
	}
	b, err := c.Create(ctx, withHelper(sandbox.Spec{Snapshot: ref}))
	if err != nil {
		t.Logf("the restore refused the snapshot: %v", err)
		return
	}
	defer b.Close(context.Background())
	if r := sh(t, b, "cat /workspace/own.txt"); strings.TrimSpace(string(r.Stdout)) != "mine" {
		t.Fatalf("the snapshot did not carry the workspace's own file: %q %s", r.Stdout, r.Stderr)
	}
	r = sh(t, b, "cd /workspace && ls -la; for f in abs rel dir/secret.txt shadow; do cat $f; done 2>&1")
	if strings.Contains(string(r.Stdout), want) {
		t.Fatalf("ESCAPE: a host file came into the sandbox through a snapshot:\n%s", r.Stdout)
	}
	filepath.Walk(b.State().Workspace, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			if data, _ := os.ReadFile(p); strings.Contains(string(data), want) {
				t.Errorf("ESCAPE: the restored workspace holds the host's secret in %s", p)
			}
		}
		return nil
	})
}
