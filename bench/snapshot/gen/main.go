// Command gen writes the snapshot benchmark's workspace: a tree of mixed
// file sizes (many small text files, some medium files, a few large ones,
// partly compressible), deterministic for a given seed.
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
)

func main() {
	dir := flag.String("dir", "", "directory to create (must not exist)")
	mib := flag.Int64("mib", 1024, "approximate total size in MiB")
	seed := flag.Uint64("seed", 1, "random seed")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "gen: -dir is required")
		os.Exit(2)
	}
	if err := generate(*dir, *mib<<20, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

// The budget is split as 25% small text files (1-16 KiB), 35% medium files
// (128 KiB-2 MiB, alternately text and random), 40% four large files (two
// log-like text, two random).
func generate(dir string, total int64, seed uint64) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	r := rand.New(rand.NewPCG(seed, 0xa9e7))
	g := &gen{r: r, vocab: vocabulary(r)}
	var written int64
	for i := 0; written < total/4; i++ {
		n := 1024 + r.IntN(15*1024)
		p := filepath.Join(dir, fmt.Sprintf("src/mod%03d/pkg%02d/file%05d.txt", i/1000, i%50, i))
		if err := g.write(p, n, true); err != nil {
			return err
		}
		written += int64(n)
	}
	for i := 0; written < total*60/100; i++ {
		n := 128<<10 + r.IntN(2<<20-128<<10)
		p := filepath.Join(dir, fmt.Sprintf("assets/a%02d/m%04d.dat", i%10, i))
		if err := g.write(p, n, i%2 == 0); err != nil {
			return err
		}
		written += int64(n)
	}
	large := (total - written) / 4
	for i := range 4 {
		p := filepath.Join(dir, fmt.Sprintf("data/large%d.%s", i, map[bool]string{true: "log", false: "bin"}[i%2 == 0]))
		if err := g.write(p, int(large), i%2 == 0); err != nil {
			return err
		}
	}
	return nil
}

type gen struct {
	r     *rand.Rand
	vocab []string
	buf   []byte
}

func vocabulary(r *rand.Rand) []string {
	const letters = "abcdefghijklmnopqrstuvwxyz"
	words := make([]string, 4096)
	for i := range words {
		b := make([]byte, 2+r.IntN(9))
		for j := range b {
			b[j] = letters[r.IntN(len(letters))]
		}
		words[i] = string(b)
	}
	return words
}

// write creates p with n bytes of text (words, numbers, newlines) or of
// random bytes.
func (g *gen) write(p string, n int, text bool) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	b := g.buf[:0]
	if text {
		for len(b) < n {
			switch g.r.IntN(12) {
			case 0:
				b = append(b, '\n')
			case 1:
				b = fmt.Appendf(b, "%d.%02d ", g.r.IntN(100000), g.r.IntN(100))
			default:
				b = append(b, g.vocab[g.r.IntN(len(g.vocab))]...)
				b = append(b, ' ')
			}
		}
		b = b[:n]
	} else {
		b = append(b, make([]byte, n)...)
		var key [32]byte
		for i := range key {
			key[i] = byte(g.r.Uint32())
		}
		_, _ = rand.NewChaCha8(key).Read(b)
	}
	g.buf = b
	return os.WriteFile(p, b, 0o644)
}
