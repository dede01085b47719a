package snapshot

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentbox/agentbox/sandbox"
)

func TestACorruptedSnapshotIsRefusedAndRestoresNothing(t *testing.T) {
	bigSum := sha(randomData(1, 3<<20+17))
	readmeSum := sha([]byte("hello\n"))
	tests := []struct {
		name   string
		damage func(t *testing.T, s *Store, id string)
	}{
		{"a flipped byte in a packed object", func(t *testing.T, s *Store, id string) {
			loc, ok := s.lookupPacked(readmeSum)
			if !ok {
				t.Fatal("README.md's content is not in a pack")
			}
			flipByte(t, filepath.Join(s.packsDir(), loc.pack+".pack"), loc.off+loc.len-1)
		}},
		{"a flipped byte in a streamed object", func(t *testing.T, s *Store, id string) { flipByte(t, s.objectPath(bigSum), 1<<20) }},
		{"a truncated object", func(t *testing.T, s *Store, id string) { os.Truncate(s.objectPath(bigSum), 100) }},
		{"a missing loose object", func(t *testing.T, s *Store, id string) { os.Remove(s.objectPath(bigSum)) }},
		{"a missing pack", func(t *testing.T, s *Store, id string) {
			loc, _ := s.lookupPacked(readmeSum)
			os.Remove(filepath.Join(s.packsDir(), loc.pack+".pack"))
		}},
		{"a damaged pack index", func(t *testing.T, s *Store, id string) {
			loc, _ := s.lookupPacked(readmeSum)
			flipByte(t, filepath.Join(s.packsDir(), loc.pack+".idx"), 30)
		}},
		{"an edited manifest", func(t *testing.T, s *Store, id string) { flipByte(t, s.manifestPath(id), 40) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openStore(t, Limits{})
			id, err := s.Save(ctx(), workspace(t), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			tt.damage(t, s, id)
			// A fresh process sees the damage (this one caches pack indexes).
			s, err = Open(s.Dir(), Options{Logger: quietLogger()})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Verify(ctx(), id); !errors.Is(err, ErrCorrupt) || !errors.Is(err, sandbox.ErrInvalid) {
				t.Errorf("Verify err = %v, want ErrCorrupt and ErrInvalid", err)
			}
			base := t.TempDir()
			dst := filepath.Join(base, "restored")
			err = s.Restore(ctx(), id, dst, 0)
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("Restore err = %v, want ErrCorrupt", err)
			}
			if ents, _ := os.ReadDir(base); len(ents) != 0 {
				t.Errorf("a refused restore left %v beside the target", ents)
			}
		})
	}
}

// flipByte inverts one byte of a file; a negative offset counts from the end.
func flipByte(t *testing.T, p string, off int64) {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if off < 0 {
		off += int64(len(data))
	}
	data[off] ^= 0xff
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
}
