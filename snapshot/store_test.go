package snapshot

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/sandbox"
)

// workspace is a tree with every kind of entry Save must handle.
func workspace(t *testing.T) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	makeTree(t, src, []node{
		{path: "README.md", data: "hello\n", mode: 0o644},
		{path: "bin/run.sh", data: "#!/bin/sh\necho hi\n", mode: 0o755},
		{path: "secret.key", data: "k", mode: 0o600},
		{path: "readonly", dir: true, mode: 0o555},
		{path: "readonly/inputs.csv", data: "a,b\n1,2\n", mode: 0o444},
		{path: "empty-dir", dir: true, mode: 0o700},
		{path: "empty-file", data: "", mode: 0o640},
		{path: "sticky", dir: true, mode: 0o1777},
		{path: "big.bin", data: string(randomData(1, 3<<20+17)), mode: 0o644},
		{path: "copy.bin", hard: "big.bin"},
		{path: "link-in", link: "bin/run.sh"},
		{path: "bin/up", link: "../README.md"},
		{path: "dangling", link: "nothing-here"},
		{path: "-dash-first", data: "sorts before the root's dot"},
		{path: "mnt", dir: true},
		{path: "mnt/data", dir: true},
		{path: "mnt/data/huge", data: "excluded mount content"},
	})
	return src
}

func TestSaveThenRestoreGivesTheSameTree(t *testing.T) {
	s := openStore(t, Limits{})
	src := workspace(t)
	info, err := s.SaveWithOptions(ctx(), src, SaveOptions{Exclude: []string{"mnt/data"}, Labels: map[string]string{"run": "r1"}})
	if err != nil {
		t.Fatal(err)
	}
	if info.Total.Files != 8 || info.Total.Symlinks != 3 || info.Labels["run"] != "r1" {
		t.Errorf("info = %+v", info)
	}
	dst := filepath.Join(t.TempDir(), "restored")
	if err := s.Restore(ctx(), info.ID, dst, 0); err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, l := range strings.Split(treeState(t, src), "\n") {
		if !strings.HasPrefix(l, "mnt/data") {
			kept = append(kept, l)
		}
	}
	want := strings.Join(kept, "\n")
	if got := treeState(t, dst); got != want {
		t.Errorf("restored tree differs\n got:\n%s\nwant:\n%s", got, want)
	}
	if err := s.Verify(ctx(), info.ID); err != nil {
		t.Errorf("Verify: %v", err)
	}
}

func TestSaveLeavesOutSpecialFilesAndEscapingLinks(t *testing.T) {
	s := openStore(t, Limits{})
	src := t.TempDir()
	makeTree(t, src, []node{
		{path: "ok", data: "x"},
		{path: "pipe", fifo: true},
		{path: "abs", link: "/etc/passwd"},
		{path: "up", link: "../outside"},
		{path: "d/chained", link: "x/../../.."},
	})
	info, err := s.SaveWithOptions(ctx(), src, SaveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, sk := range info.Skipped {
		got[sk.Path] = sk.Reason
	}
	for _, p := range []string{"pipe", "abs", "up", "d/chained"} {
		if got[p] == "" {
			t.Errorf("%s was not reported as skipped (skipped: %v)", p, info.Skipped)
		}
	}
	if info.Total.Files != 1 || info.Total.Symlinks != 0 {
		t.Errorf("totals = %+v", info.Total)
	}
}

func TestSavingTheSameTreeAgainStoresNoNewObjects(t *testing.T) {
	s := openStore(t, Limits{})
	src := workspace(t)
	first, err := s.SaveWithOptions(ctx(), src, SaveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if first.NewObjects != 7 { // big.bin and its hard link share one object; empty files have none
		t.Errorf("first save stored %d objects, want 7", first.NewObjects)
	}
	if err := os.WriteFile(filepath.Join(src, "README.md"), []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	second, err := s.SaveWithOptions(ctx(), src, SaveOptions{Parent: first.ID[:8]})
	if err != nil {
		t.Fatal(err)
	}
	if second.NewObjects != 1 || second.Parent != first.ID {
		t.Errorf("second save: %d new objects (want 1), parent %q (want %q)", second.NewObjects, second.Parent, first.ID)
	}
}

func TestRestoreRefusesATargetThatIsNotEmpty(t *testing.T) {
	s := openStore(t, Limits{})
	id, err := s.Save(ctx(), workspace(t), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	tests := []struct {
		name    string
		prepare func(p string)
		wantErr bool
	}{
		{"an absent directory is created", func(p string) {}, false},
		{"an empty directory is filled", func(p string) { os.Mkdir(p, 0o755) }, false},
		{"a directory with a file is refused", func(p string) { os.Mkdir(p, 0o755); os.WriteFile(filepath.Join(p, "x"), nil, 0o644) }, true},
		{"a regular file is refused", func(p string) { os.WriteFile(p, nil, 0o644) }, true},
		{"a symlink to an empty directory is refused", func(p string) { os.Mkdir(p+".real", 0o755); os.Symlink(p+".real", p) }, true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(base, string(rune('a'+i)))
			tt.prepare(p)
			err := s.Restore(ctx(), id, p, 0)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Restore err = %v, want error %v", err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, sandbox.ErrInvalid) {
				t.Errorf("error %v is not ErrInvalid", err)
			}
			if err == nil {
				if _, err := os.Stat(filepath.Join(p, "README.md")); err != nil {
					t.Errorf("restored tree lacks README.md: %v", err)
				}
			}
		})
	}
	if left, _ := filepath.Glob(filepath.Join(base, ".agentbox-restore-*")); len(left) > 0 {
		t.Errorf("staging left beside targets: %v", left)
	}
}

func TestReferencesResolveByUniquePrefix(t *testing.T) {
	s := openStore(t, Limits{})
	id, err := s.Save(ctx(), workspace(t), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, ref string
		kind      error
		inMessage string
	}{
		{"the full ID is found", id, nil, ""},
		{"a prefix is found", id[:6], nil, ""},
		{"an upper-case prefix is found", strings.ToUpper(id[:6]), nil, ""},
		{"an unknown ID is not found and says where to look", "0000ffff", sandbox.ErrNotFound, "agentbox snapshot ls"},
		{"a non-hex reference is invalid", "../etc", sandbox.ErrInvalid, "not a hex"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info, err := s.Get(ctx(), tt.ref)
			if tt.kind == nil {
				if err != nil || info.ID != id {
					t.Fatalf("Get(%q) = %v, %v", tt.ref, info.ID, err)
				}
				return
			}
			if !errors.Is(err, tt.kind) || !strings.Contains(err.Error(), tt.inMessage) {
				t.Fatalf("Get(%q) err = %v, want %v mentioning %q", tt.ref, err, tt.kind, tt.inMessage)
			}
		})
	}
}

func TestDeleteCollectsOnlyUnreferencedObjects(t *testing.T) {
	s := openStore(t, Limits{})
	src := workspace(t)
	a, err := s.Save(ctx(), src, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(src, "only-in-b"), []byte("b's own content"), 0o644)
	b, err := s.Save(ctx(), src, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx(), b); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.lookupPacked(sha([]byte("b's own content"))); ok {
		t.Error("the object only b used is still in the store")
	}
	if packs, _ := filepath.Glob(filepath.Join(s.packsDir(), "*.pack")); len(packs) != 1 {
		t.Errorf("packs after deleting b: %v, want a's only", packs)
	}
	if err := s.Verify(ctx(), a); err != nil {
		t.Errorf("snapshot a damaged by deleting b: %v", err)
	}
	if err := s.Delete(ctx(), b); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("deleting b twice: %v, want ErrNotFound", err)
	}
	list, err := s.List(ctx())
	if err != nil || len(list) != 1 || list[0].ID != a {
		t.Errorf("List = %+v, %v; want only %s", list, err, a)
	}
}

func TestProgressEndsAtTheTotal(t *testing.T) {
	s := openStore(t, Limits{})
	var last, total int64
	info, err := s.SaveWithOptions(ctx(), workspace(t), SaveOptions{Progress: func(d, t int64) { last, total = d, t }})
	if err != nil {
		t.Fatal(err)
	}
	if last != total || total != info.Total.Bytes {
		t.Errorf("save progress ended at %d/%d, content is %d", last, total, info.Total.Bytes)
	}
	last, total = 0, 0
	err = s.RestoreWithOptions(ctx(), info.ID, filepath.Join(t.TempDir(), "r"), RestoreOptions{Progress: func(d, t int64) { last, total = d, t }})
	if err != nil || last != total || total != info.Total.Bytes {
		t.Errorf("restore progress ended at %d/%d (err %v)", last, total, err)
	}
}

func TestBadExcludesAreRefused(t *testing.T) {
	s := openStore(t, Limits{})
	src := workspace(t)
	for _, ex := range []string{"/abs", "..", "../x", ".", ""} {
		if _, err := s.Save(ctx(), src, []string{ex}, 0); !errors.Is(err, sandbox.ErrInvalid) {
			t.Errorf("exclude %q: err = %v, want ErrInvalid", ex, err)
		}
	}
}

func TestAnUnknownParentIsNotFound(t *testing.T) {
	s := openStore(t, Limits{})
	_, err := s.SaveWithOptions(ctx(), workspace(t), SaveOptions{Parent: "abcdef12"})
	if !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
}

func TestSetuidBitsAreNotRestored(t *testing.T) {
	s := openStore(t, Limits{})
	src := t.TempDir()
	makeTree(t, src, []node{{path: "suid", data: "#!/bin/sh\n", mode: 0o4755}, {path: "sgid", data: "x", mode: 0o2755}})
	id, err := s.Save(ctx(), src, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "r")
	if err := s.Restore(ctx(), id, dst, 0); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"suid", "sgid"} {
		fi, err := os.Stat(filepath.Join(dst, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 || fi.Mode().Perm() != 0o755 {
			t.Errorf("%s restored as %v, want -rwxr-xr-x", name, fi.Mode())
		}
	}
}

func TestARestoreRemovesTheStagingOfAKilledRestore(t *testing.T) {
	s := openStore(t, Limits{})
	id, err := s.Save(ctx(), workspace(t), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	stale := filepath.Join(base, restorePrefix+"12345")
	os.MkdirAll(filepath.Join(stale, "half"), 0o755)
	if err := s.Restore(ctx(), id, filepath.Join(base, "r"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale restore staging still there (stat: %v)", err)
	}
}
