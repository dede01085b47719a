package escapetest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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

// TestOutgrowingTheDiskLimitThroughASnapshotFails: a --disk session can
// make files of any apparent size (300 sparse files under its file size limit: 18 GB), which a snapshot
// used to read, store and restore as dense data. A snapshot holds no
// more than the session's workspace may, holes kept, and seeds only a
// session whose workspace may hold it.
func TestOutgrowingTheDiskLimitThroughASnapshotFails(t *testing.T) {
	c0 := newClient(t)
	const limit = 64 << 20
	spec := sandbox.Spec{Policy: sandbox.Policy{Resources: sandbox.Resources{DiskBytes: limit}}}
	if !enforces(c0, sandbox.PartDisk) {
		assertRefused(t, spec, sandbox.PartDisk)
		return
	}
	store, err := snapshot.Open(t.TempDir(), snapshot.Options{Logger: backendLog.logger()})
	if err != nil {
		t.Fatal(err)
	}
	c, err := linux.New(linux.Options{StateDir: stateDir, Snapshots: store, Logger: backendLog.logger()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a, err := c.Create(ctx, withHelper(spec))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(context.Background())
	if r := sh(t, a, "for i in $(seq 300); do truncate -s 60M /workspace/big$i; done"); r.ExitCode != 0 {
		t.Fatalf("truncate: %s", r.Stderr)
	}
	if ref, err := a.Snapshot(ctx); err == nil {
		t.Fatalf("ESCAPE: a session of %d bytes saved an 18 GB snapshot %s", limit, ref)
	} else if !errors.Is(err, sandbox.ErrInvalid) || !strings.Contains(err.Error(), "over the 64.0 MiB") {
		t.Errorf("the refusal %q does not name the 64 MiB disk limit", err)
	}

	// Within the limit by apparent size, a sparse file saves and restores
	// with its holes: the data of a few blocks, not 48 MiB.
	if r := sh(t, a, "rm big* && truncate -s 48M sparse && echo data | dd of=sparse bs=1 seek=20000000 conv=notrunc 2>/dev/null"); r.ExitCode != 0 {
		t.Fatalf("make a sparse file: %s", r.Stderr)
	}
	ref, err := a.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Create(ctx, withHelper(sandbox.Spec{Snapshot: ref, Policy: spec.Policy}))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(context.Background())
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(b.State().Workspace, "sparse"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != 48<<20 || st.Blocks*512 > 1<<20 {
		t.Errorf("restored sparse file: %d bytes, %d allocated; want 48 MiB with its holes", st.Size, st.Blocks*512)
	}

	// A snapshot larger than a session's limit (made where it fit)
	// cannot seed that session.
	big, err := c.Create(ctx, withHelper(sandbox.Spec{}))
	if err != nil {
		t.Fatal(err)
	}
	defer big.Close(context.Background())
	if r := sh(t, big, "truncate -s 128M /workspace/big"); r.ExitCode != 0 {
		t.Fatalf("truncate: %s", r.Stderr)
	}
	bigRef, err := big.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := c.Create(ctx, withHelper(sandbox.Spec{Snapshot: bigRef, Policy: spec.Policy})); err == nil {
		s.Close(context.Background())
		t.Fatalf("ESCAPE: a 128 MiB snapshot seeded a session of %d bytes", limit)
	} else if !strings.Contains(err.Error(), "over the 64.0 MiB") {
		t.Errorf("the refusal %q does not name the 64 MiB disk limit", err)
	}
}
