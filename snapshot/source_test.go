package snapshot

import (
	"io"
	"os"
	"path/filepath"
	"testing"
)

// A directory swapped for a symlink after the walk (an agent racing the
// save) must not let the save read files outside the tree.
func TestTheSourceNeverOpensThroughASwappedSymlink(t *testing.T) {
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("host secret"), 0o600)
	tree := t.TempDir()
	os.Symlink(outside, filepath.Join(tree, "d"))
	os.Symlink(filepath.Join(outside, "secret"), filepath.Join(tree, "f"))
	for _, useOpenat2 := range []bool{true, false} {
		name := map[bool]string{true: "with openat2", false: "with the os.Root fallback"}[useOpenat2]
		t.Run(name, func(t *testing.T) {
			src, err := openSource(tree)
			if err != nil {
				t.Fatal(err)
			}
			defer src.close()
			src.openat2.Store(useOpenat2)
			for _, p := range []string{"d/secret", "f"} {
				f, err := src.open(p)
				if err == nil {
					data, _ := io.ReadAll(f)
					f.Close()
					t.Errorf("opened %s through a symlink out of the tree, read %q", p, data)
				}
			}
		})
	}
}
