package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestTheGeneratorIsDeterministic(t *testing.T) {
	a, err := Generate(DefaultSeed).Files()
	if err != nil {
		t.Fatal(err)
	}
	b, err := Generate(DefaultSeed).Files()
	if err != nil {
		t.Fatal(err)
	}
	for name := range a {
		if !bytes.Equal(a[name], b[name]) {
			t.Errorf("%s differs between two runs with the same seed", name)
		}
	}
	c, _ := Generate(DefaultSeed + 1).Files()
	if bytes.Equal(a["bank.csv"], c["bank.csv"]) {
		t.Error("another seed wrote the same bank statement")
	}
}

func TestTheCommittedStatementsAreTheGeneratorsOutput(t *testing.T) {
	files, err := Generate(DefaultSeed).Files()
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		path := filepath.Join("..", "statements", name)
		if name == PlantedFile {
			path = filepath.Join("..", "testdata", "planted.json")
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("read %s: %v (run: cd examples/reconcile && go run ./gen)", path, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not what the generator writes for seed %d; regenerate it: cd examples/reconcile && go run ./gen", path, DefaultSeed)
		}
	}
}

func TestTheStatementsLookLikeAQuarterWithFourPlantedProblems(t *testing.T) {
	s := Generate(DefaultSeed)
	if n := len(s.Bank); n < 180 || n > 240 {
		t.Errorf("%d bank rows, want about 200", n)
	}
	bal := s.Opening
	for i, r := range s.Bank {
		bal += r.Amount
		if r.Balance != bal {
			t.Fatalf("bank row %d: balance %s, running total %s", i+1, r.Balance, bal)
		}
	}
	kinds := map[string]bool{}
	for _, p := range s.Planted {
		kinds[p.Type] = true
	}
	for _, k := range []string{"missing_ledger_entry", "amount_mismatch", "duplicate_bank_charge", "invoice_marked_paid_unpaid"} {
		if !kinds[k] {
			t.Errorf("no planted %s", k)
		}
	}
	if len(s.Planted) != 4 {
		t.Errorf("%d planted discrepancies, want 4", len(s.Planted))
	}
	open := 0
	for _, inv := range s.Invoices {
		if inv.Status == "open" {
			open++
		}
	}
	if open == 0 || open == len(s.Invoices) {
		t.Errorf("%d of %d invoices open, want some but not all", open, len(s.Invoices))
	}
}
