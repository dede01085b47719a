package manifest

import (
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// fixture is a trusted base directory with sources, and a directory
// outside it standing for the rest of the host.
type fixture struct {
	base, outside string
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	root := t.TempDir()
	f := fixture{base: filepath.Join(root, "proj"), outside: filepath.Join(root, "host")}
	files := map[string]string{
		"proj/src/ledger.csv":       "date,amount\n2026-01-01,10\n",
		"proj/src/tree/a.txt":       "a\n",
		"proj/src/tree/sub/b.txt":   "b\n",
		"proj/src/mounted/x.csv":    "x\n",
		"host/secret.txt":           "host secret\n",
		"host/granted/shared.txt":   "shared\n",
		"proj/src/empty/.gitignore": "",
	}
	for p, c := range files {
		full := filepath.Join(root, p)
		must(t, os.MkdirAll(filepath.Dir(full), 0o755))
		must(t, os.WriteFile(full, []byte(c), 0o644))
	}
	must(t, os.Symlink("a.txt", filepath.Join(f.base, "src/tree/link")))
	must(t, os.Symlink("../a.txt", filepath.Join(f.base, "src/tree/sub/up")))
	return f
}

// tree makes a fresh source tree under the base holding one problem.
func (f fixture) tree(t *testing.T, name string, plant func(dir string)) string {
	t.Helper()
	dir := filepath.Join(f.base, name)
	must(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "ok.txt"), []byte("ok"), 0o644))
	plant(dir)
	return name
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func mkfifo(t *testing.T, p string) {
	t.Helper()
	must(t, syscall.Mkfifo(p, 0o644))
}

func mksocket(t *testing.T, p string) {
	t.Helper()
	l, err := net.Listen("unix", p)
	must(t, err)
	t.Cleanup(func() { l.Close() })
}

func ptr[T any](v T) *T { return &v }
