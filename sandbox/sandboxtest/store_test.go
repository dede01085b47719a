package sandboxtest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentbox/agentbox/sandbox"
)

func TestDirStore(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	write := func(p, data string, mode os.FileMode) {
		t.Helper()
		full := filepath.Join(src, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("a.txt", "a", 0o640)
	write("d/b.txt", "b", 0o600)
	write("mnt/skip.txt", "mounted", 0o644)
	if err := os.Symlink("a.txt", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	s := NewDirStore(t.TempDir())
	ref, err := s.Save(ctx, src, []string{"mnt"}, 0)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("a restore reproduces files, modes and links minus exclusions", func(t *testing.T) {
		dst := filepath.Join(t.TempDir(), "new")
		if err := s.Restore(ctx, ref, dst, 0); err != nil {
			t.Fatal(err)
		}
		for p, want := range map[string]string{"a.txt": "a", "d/b.txt": "b"} {
			got, err := os.ReadFile(filepath.Join(dst, p))
			if err != nil || string(got) != want {
				t.Fatalf("%s = %q, %v", p, got, err)
			}
		}
		if fi, _ := os.Stat(filepath.Join(dst, "a.txt")); fi.Mode().Perm() != 0o640 {
			t.Errorf("a.txt mode %v", fi.Mode().Perm())
		}
		if l, err := os.Readlink(filepath.Join(dst, "link")); err != nil || l != "a.txt" {
			t.Errorf("link = %q, %v", l, err)
		}
		if _, err := os.Stat(filepath.Join(dst, "mnt")); err == nil {
			t.Error("an excluded path was saved")
		}
	})
	t.Run("a restore into a non-empty directory is refused", func(t *testing.T) {
		if err := s.Restore(ctx, ref, src, 0); !errors.Is(err, sandbox.ErrInvalid) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("an unknown snapshot is not found", func(t *testing.T) {
		if err := s.Restore(ctx, "dirstore-0000", t.TempDir(), 0); !errors.Is(err, sandbox.ErrNotFound) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("a reference with a path in it is invalid", func(t *testing.T) {
		if err := s.Restore(ctx, "../"+filepath.Base(src), t.TempDir(), 0); !errors.Is(err, sandbox.ErrInvalid) {
			t.Fatalf("err = %v", err)
		}
	})
}
