package wsfs

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRefuseSymlinksRefusesEvenLinksThatStayInside(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "secret"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "secret", "x"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("secret/x", filepath.Join(dir, "alias")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("secret", filepath.Join(dir, "dir-alias")); err != nil {
		t.Fatal(err)
	}
	// With the component walk too: kernels without openat2 get the same
	// refusals, not a refusal of every access.
	for _, walk := range []bool{false, true} {
		r, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		r.walk = walk
		if got, err := r.ReadFile("alias", 0); err != nil || string(got) != "data" {
			t.Fatalf("walk=%v: without RefuseSymlinks an inside link reads %q, %v; want data", walk, got, err)
		}
		r.RefuseSymlinks()
		if got, err := r.ReadFile("alias", 0); err == nil {
			t.Errorf("walk=%v: ReadFile through a link read %q", walk, got)
		}
		if err := r.WriteFile("dir-alias/y", []byte("z"), 0o644, -1, -1); err == nil {
			t.Errorf("walk=%v: WriteFile through a linked directory succeeded", walk)
		}
		if got, err := r.ReadFile("secret/x", 0); err != nil || string(got) != "data" {
			t.Errorf("walk=%v: a link-free path: %q, %v", walk, got, err)
		}
	}
}
