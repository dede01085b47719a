package owned

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/agentbox/agentbox/internal/testenv"
)

func ownerOf(t *testing.T, p string) Owner {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return Owner{UID: int(st.Uid), GID: int(st.Gid)}
}

func TestOpenReadsTheOwnerThroughItsDescriptor(t *testing.T) {
	testenv.NeedRoot(t, "a directory owned by another user")
	dir := filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 4242, 4343); err != nil {
		t.Fatal(err)
	}
	p, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// The path now names another directory: p still is the first one.
	if err := os.Rename(dir, dir+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if p.Owner != (Owner{UID: 4242, GID: 4343}) || p.Mode.Perm() != 0o750 || !p.Mode.IsDir() {
		t.Errorf("Open = %v", p)
	}
	if want := dir + " (owner 4242:4343, mode 0750)"; p.String() != want {
		t.Errorf("String() = %q, want %q", p.String(), want)
	}
	again, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if p.Same(again) {
		t.Error("Same says the replaced directory is the first one")
	}
}

func TestMakeMakesTheMissingPartsOwnedLikeTheirParentAndTheLastByOwner(t *testing.T) {
	testenv.NeedRoot(t, "giving a directory to another user")
	top := filepath.Join(t.TempDir(), "top")
	if err := os.Mkdir(top, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(top, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(top, "a", "b", "ws")
	p, made, err := Make(ws, 0o700, &Owner{UID: 1000, GID: 1001})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if !made || p.Owner != (Owner{UID: 1000, GID: 1001}) || p.Mode.Perm() != 0o700 {
		t.Errorf("Make = %v, made %t", p, made)
	}
	for _, d := range []string{"a", "a/b"} {
		if o := ownerOf(t, filepath.Join(top, d)); o != (Owner{UID: 4242, GID: 4242}) {
			t.Errorf("%s made owned by %v, want its parent's 4242:4242", d, o)
		}
	}
	// What exists is opened and left alone.
	again, made, err := Make(ws, 0o755, &Owner{UID: 7, GID: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if made || again.Owner != (Owner{UID: 1000, GID: 1001}) || !again.Same(p) {
		t.Errorf("Make of an existing directory = %v, made %t", again, made)
	}
}

// fakeStore restores a fixed tree, as a store does: as this process.
type fakeStore struct{ restored string }

func (f *fakeStore) Restore(ctx context.Context, ref, dir string, _ int64) error {
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "sub", "f"), []byte(ref), 0o600); err != nil {
		return err
	}
	f.restored = dir
	return os.Symlink("/etc/passwd", filepath.Join(dir, "link"))
}

func TestRestoreGivesTheRestoredTreeToTheOwnerAndNothingElse(t *testing.T) {
	testenv.NeedRoot(t, "giving files to another user")
	passwd := ownerOf(t, "/etc/passwd")
	for _, tc := range []struct {
		name   string
		before func(t *testing.T, ws string)
		owner  *Owner
		want   Owner
	}{
		{"into a missing directory, for a given owner", func(*testing.T, string) {}, &Owner{UID: 1000, GID: 1000}, Owner{UID: 1000, GID: 1000}},
		{"into a missing directory, owned like its parent", func(*testing.T, string) {}, nil, Owner{UID: 4242, GID: 4242}},
		{"into an empty directory, owned like it", func(t *testing.T, ws string) {
			if err := os.Mkdir(ws, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(ws, 5000, 5001); err != nil {
				t.Fatal(err)
			}
		}, nil, Owner{UID: 5000, GID: 5001}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			top := t.TempDir()
			if err := os.Chown(top, 4242, 4242); err != nil {
				t.Fatal(err)
			}
			ws := filepath.Join(top, "ws")
			tc.before(t, ws)
			store := &fakeStore{}
			p, err := Restore(context.Background(), store, "ref1", ws, tc.owner, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			if p.Owner != tc.want {
				t.Errorf("restored directory owned by %v, want %v", p.Owner, tc.want)
			}
			for _, e := range []string{".", "sub", "sub/f", "link"} {
				if o := ownerOf(t, filepath.Join(ws, e)); o != tc.want {
					t.Errorf("%s owned by %v, want %v", e, o, tc.want)
				}
			}
			if got, _ := os.ReadFile(filepath.Join(ws, "sub", "f")); string(got) != "ref1" {
				t.Errorf("sub/f = %q", got)
			}
			if o := ownerOf(t, "/etc/passwd"); o != passwd {
				t.Fatalf("the link's target changed owner: %v", o)
			}
			if names, _ := filepath.Glob(filepath.Join(top, stagePrefix+"*")); len(names) > 0 {
				t.Errorf("the private directory was left: %v", names)
			}
		})
	}
}

func TestRestoreRefusesADirectoryThatHoldsSomething(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "mine"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Restore(context.Background(), &fakeStore{}, "ref", ws, nil, 0)
	if !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("Restore into a directory with a file = %v, want ErrNotEmpty", err)
	}
	if _, err := os.Stat(filepath.Join(ws, "mine")); err != nil {
		t.Errorf("the file is gone: %v", err)
	}
	if names, _ := filepath.Glob(filepath.Join(filepath.Dir(ws), stagePrefix+"*")); len(names) > 0 {
		t.Errorf("the private directory was left: %v", names)
	}
}
