// Command gen writes the reconciliation example's client statements: a bank
// statement, the firm's ledger and an invoice list for one quarter, from a
// seed, with a few planted discrepancies that an auditor must find. The
// same seed always gives the same bytes.
//
//	go run ./gen -seed 42 -out statements -planted testdata/planted.json
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	seed := flag.Uint64("seed", DefaultSeed, "random seed; the same seed writes the same files")
	out := flag.String("out", "statements", "directory to write bank.csv, ledger.csv and invoices.csv into")
	planted := flag.String("planted", "testdata/planted.json", "file to write the planted discrepancies into (the answer key; keep it out of the sandbox)")
	flag.Parse()
	if err := run(*seed, *out, *planted); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(seed uint64, out, planted string) error {
	s := Generate(seed)
	files, err := s.Files()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", out, err)
	}
	for name, data := range files {
		dst := filepath.Join(out, name)
		if name == PlantedFile {
			if planted == "" {
				continue
			}
			dst = planted
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return fmt.Errorf("create %s: %w", filepath.Dir(dst), err)
			}
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", dst, err)
		}
	}
	fmt.Printf("wrote %d bank rows, %d ledger entries, %d invoices and %d planted discrepancies (seed %d)\n",
		len(s.Bank), len(s.Ledger), len(s.Invoices), len(s.Planted), seed)
	return nil
}
