package manifest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// The attack: while Materialize runs, a directory it made (a/) is swapped
// for a link to a host directory holding a file of the same name; a later
// entry fails, and the cleanup removes what was made. It must not remove
// the host's file through the link.
func TestMaterializeCleanupNeverRemovesThroughALinkSwappedIn(t *testing.T) {
	f := newFixture(t)
	ws := t.TempDir()
	must(t, os.WriteFile(filepath.Join(ws, "z-existing.txt"), []byte("mine"), 0o644))
	must(t, os.WriteFile(filepath.Join(f.outside, "new.txt"), []byte("host file"), 0o644))
	m := Manifest{Entries: map[string]Entry{
		"a/new.txt":      {File: &File{Content: "x"}},
		"z-existing.txt": {File: &File{Content: "overwrite?"}},
	}}
	swapped := false
	swap := func(done, total int64) {
		if swapped {
			return
		}
		swapped = true
		must(t, os.Rename(filepath.Join(ws, "a"), filepath.Join(t.TempDir(), "a")))
		must(t, os.Symlink(f.outside, filepath.Join(ws, "a")))
	}
	_, err := m.Materialize(context.Background(), ws, MaterializeOptions{Base: f.base, UID: -1, GID: -1, Progress: swap})
	if err == nil || !swapped {
		t.Fatalf("Materialize = %v (swapped: %v), want the failure on z-existing.txt after the swap", err, swapped)
	}
	if b, err := os.ReadFile(filepath.Join(f.outside, "new.txt")); err != nil || string(b) != "host file" {
		t.Fatalf("the host's new.txt = %q, %v after the cleanup; want it untouched", b, err)
	}
}
