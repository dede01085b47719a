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
	for _, walk := range []bool{false, true} {
		name := map[bool]string{false: "with openat2", true: "with the component walk"}[walk]
		t.Run(name, func(t *testing.T) {
			src, err := openSource(tree)
			if err != nil {
				t.Fatal(err)
			}
			defer src.close()
			src.walk = walk
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

// A link that stays inside the tree is refused as well, with openat2 and
// without: the walk recorded the link as a link, so reading through it
// would store another file's content under the walked path.
func TestTheSourceRefusesLinksInsideTheTreeToo(t *testing.T) {
	tree := t.TempDir()
	os.Mkdir(filepath.Join(tree, "in"), 0o755)
	os.WriteFile(filepath.Join(tree, "in", "f"), []byte("inside"), 0o644)
	os.Symlink("in", filepath.Join(tree, "d"))
	for _, walk := range []bool{false, true} {
		src, err := openSource(tree)
		if err != nil {
			t.Fatal(err)
		}
		src.walk = walk
		if f, err := src.open("d/f"); err != errChanged {
			if err == nil {
				f.Close()
			}
			t.Errorf("walk=%v: open through an inside link = %v, want errChanged", walk, err)
		}
		if f, err := src.open("in/f"); err != nil {
			t.Errorf("walk=%v: open of a plain path: %v", walk, err)
		} else {
			f.Close()
		}
		src.close()
	}
}
