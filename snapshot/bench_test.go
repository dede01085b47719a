package snapshot

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// benchTree is a 64 MiB workspace of mixed files: 2,000 small text files
// (about 16 MiB), 24 medium files of 1 MiB, half text and half random, and
// two 12 MiB files (one text, one random).
func benchTree(b *testing.B) (string, int64) {
	b.Helper()
	dir := b.TempDir()
	var nodes []node
	for i := range 2000 {
		nodes = append(nodes, node{path: fmt.Sprintf("src/pkg%02d/file%04d.go", i%40, i), data: string(textData(uint64(i), 4000+(i*37)%8000))})
	}
	for i := range 24 {
		d := textData(uint64(5000+i), 1<<20)
		if i%2 == 1 {
			d = randomData(uint64(5000+i), 1<<20)
		}
		nodes = append(nodes, node{path: fmt.Sprintf("assets/m%02d.bin", i), data: string(d)})
	}
	nodes = append(nodes,
		node{path: "data/big.log", data: string(textData(9001, 12<<20))},
		node{path: "data/big.bin", data: string(randomData(9002, 12<<20))})
	makeTree(b, dir, nodes)
	var total int64
	for _, n := range nodes {
		total += int64(len(n.data))
	}
	return dir, total
}

func BenchmarkSave(b *testing.B) {
	src, total := benchTree(b)
	b.SetBytes(total)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		s, err := Open(filepath.Join(b.TempDir(), fmt.Sprint(i)), Options{Logger: quietLogger()})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Save(ctx(), src, nil, 0); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSaveUnchanged(b *testing.B) {
	src, total := benchTree(b)
	s := openStore(b, Limits{})
	if _, err := s.Save(ctx(), src, nil, 0); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(total)
	b.ResetTimer()
	for b.Loop() {
		if _, err := s.Save(ctx(), src, nil, 0); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRestore(b *testing.B) {
	src, total := benchTree(b)
	s := openStore(b, Limits{})
	id, err := s.Save(ctx(), src, nil, 0)
	if err != nil {
		b.Fatal(err)
	}
	out := b.TempDir()
	b.SetBytes(total)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		dst := filepath.Join(out, fmt.Sprint(i))
		if err := s.Restore(ctx(), id, dst, 0); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		os.RemoveAll(dst)
		b.StartTimer()
	}
}
