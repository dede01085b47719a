package snapshot

import (
	"archive/tar"
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fuzzLimits are small so that the fuzzer reaches them.
var fuzzLimits = Limits{MaxEntries: 64, MaxTotalBytes: 1 << 20, MaxExpansionRatio: 50, ExpansionSlack: 64 << 10}

// FuzzImport feeds arbitrary bytes to Import and restores whatever it
// accepts. Whatever the input: no panic, the limits hold, a snapshot that
// imported restores, nothing appears outside the store and the target,
// and no restored symlink resolves outside the target.
func FuzzImport(f *testing.F) {
	for _, ents := range [][]tarEntry{
		{{name: "a.txt", data: "hello"}, {name: "d/", typ: tar.TypeDir}, {name: "d/l", typ: tar.TypeSymlink, link: "../a.txt"}},
		{{name: "../evil", data: "x"}},
		{{name: "/abs", data: "x"}},
		{{name: "l", typ: tar.TypeSymlink, link: "/etc"}, {name: "l/x", data: "x"}},
		{{name: "d/up", typ: tar.TypeSymlink, link: ".."}, {name: "l", typ: tar.TypeSymlink, link: "d/up/../x"}},
		{{name: "x", data: "1"}, {name: "h", typ: tar.TypeLink, link: "x"}},
		{{name: "h", typ: tar.TypeLink, link: "../../etc/passwd"}},
		{{name: "p", typ: tar.TypeFifo}, {name: "c", typ: tar.TypeChar}},
		{{name: "./", typ: tar.TypeDir}, {name: "./x/y/z", data: strings.Repeat("z", 5000)}},
	} {
		f.Add(makeTar(f, ents))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		base := t.TempDir()
		s, err := Open(filepath.Join(base, "store"), Options{Logger: quietLogger(), Limits: fuzzLimits})
		if err != nil {
			t.Fatal(err)
		}
		s.noSync = true
		info, err := s.Import(context.Background(), bytes.NewReader(data))
		if err != nil {
			if list, _ := s.List(context.Background()); len(list) != 0 {
				t.Fatalf("a refused import left a snapshot: %v", list)
			}
			return
		}
		tot := info.Total
		if int64(tot.Files+tot.Dirs+tot.Symlinks) > fuzzLimits.MaxEntries || tot.Bytes > fuzzLimits.MaxTotalBytes {
			t.Fatalf("limits not honoured: %+v", tot)
		}
		out := filepath.Join(base, "out")
		if err := s.Restore(context.Background(), info.ID, out, 0); err != nil {
			t.Fatalf("an imported snapshot does not restore: %v", err)
		}
		ents, _ := os.ReadDir(base)
		for _, e := range ents {
			if e.Name() != "store" && e.Name() != "out" {
				t.Fatalf("restore wrote %q outside its target", e.Name())
			}
		}
		var files int64
		err = filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			files++
			if d.Type()&fs.ModeSymlink != 0 {
				if real, err := filepath.EvalSymlinks(p); err == nil {
					if real != out && !strings.HasPrefix(real, out+string(filepath.Separator)) {
						t.Errorf("symlink %s resolves outside the target, to %s", p, real)
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if files > fuzzLimits.MaxEntries {
			t.Fatalf("restored %d entries, limit %d", files, fuzzLimits.MaxEntries)
		}
	})
}
