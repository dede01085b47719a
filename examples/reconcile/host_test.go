package reconcile_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/agent"
	"github.com/agentbox/agentbox/agent/model/scripted"
	"github.com/agentbox/agentbox/artifact"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
)

// finding is a discrepancy reduced to what identifies it.
type finding struct{ Type, Reference string }

func plantedFindings(t *testing.T) []finding {
	t.Helper()
	var key struct {
		Discrepancies []finding `json:"discrepancies"`
	}
	readJSON(t, filepath.Join("testdata", "planted.json"), &key)
	return sorted(key.Discrepancies)
}

func reportedFindings(t *testing.T, path string) []finding {
	t.Helper()
	var out struct {
		Discrepancies []finding `json:"discrepancies"`
	}
	readJSON(t, path, &out)
	return sorted(out.Discrepancies)
}

func sorted(f []finding) []finding {
	sort.Slice(f, func(i, j int) bool { return f[i].Type+f[i].Reference < f[j].Type+f[j].Reference })
	return f
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func needPython(t *testing.T) string {
	t.Helper()
	return testenv.NeedCommand(t, "python3")
}

func TestReconcilePyFindsExactlyThePlantedDiscrepancies(t *testing.T) {
	py := needPython(t)
	out := t.TempDir()
	cmd := exec.Command(py, "reconcile.py", "--statements", "statements", "--output", out)
	stdout, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("reconcile.py: %v\n%s", err, stdout)
	}
	got, want := reportedFindings(t, filepath.Join(out, "discrepancies.json")), plantedFindings(t)
	if len(got) != len(want) {
		t.Fatalf("found %v, planted %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("found %v, planted %v", got[i], want[i])
		}
	}
	report, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"# Reconciliation report", "Opening balance | 48,250.00", "Matched bank to ledger",
		"Missing ledger entry", "Amount mismatch", "two transposed digits", "Duplicate bank charge", "Invoice marked paid but unpaid",
	} {
		if !strings.Contains(string(report), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	if !strings.Contains(string(stdout), "4 discrepancies") {
		t.Errorf("stdout = %s", stdout)
	}

	t.Run("its outputs pass the example's artifact rules", func(t *testing.T) {
		rules, err := artifact.LoadRules("rules.yaml")
		if err != nil {
			t.Fatal(err)
		}
		ws := t.TempDir()
		if err := os.Rename(out, filepath.Join(ws, "output")); err != nil {
			t.Fatal(err)
		}
		src, err := artifact.NewDirSource(ws)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := artifact.Promote(context.Background(), src, rules, filepath.Join(t.TempDir(), "promoted"), artifact.PromoteOptions{})
		if err != nil {
			t.Fatalf("promote: %v", err)
		}
		if len(rec.Files) != 2 {
			t.Errorf("promoted %d files, want 2", len(rec.Files))
		}
	})
}

func TestReconcilePyReportsACleanSetAsClean(t *testing.T) {
	py := needPython(t)
	dir := t.TempDir()
	st := filepath.Join(dir, "statements")
	os.Mkdir(st, 0o755)
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(st, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("bank.csv", "date,description,amount,balance,reference\n2026-01-02,FASTER PAYMENT FROM A INV-1,100.00,1100.00,INV-1\n2026-01-03,RENT,-50.00,1050.00,TRX1\n")
	write("ledger.csv", "date,entry_id,account,description,amount,reference\n2026-01-02,JE-1,1100 Trade debtors,A,100.00,INV-1\n2026-01-04,JE-2,6100 Rent,RENT,-50.00,TRX1\n")
	write("invoices.csv", "number,client,date,amount,status\nINV-1,A,2025-12-20,100.00,paid\nINV-2,B,2026-01-20,70.00,open\n")
	out := filepath.Join(dir, "output")
	if b, err := exec.Command(py, "reconcile.py", "--statements", st, "--output", out).CombinedOutput(); err != nil {
		t.Fatalf("reconcile.py: %v\n%s", err, b)
	}
	if got := reportedFindings(t, filepath.Join(out, "discrepancies.json")); len(got) != 0 {
		t.Errorf("a clean set has discrepancies: %v", got)
	}
	report, _ := os.ReadFile(filepath.Join(out, "report.md"))
	if !strings.Contains(string(report), "None: the bank statement, the ledger and the invoice list agree.") {
		t.Errorf("report.md:\n%s", report)
	}
}

func TestTheAgentFileResolvesAgainstItsDirectory(t *testing.T) {
	file, err := agent.LoadFile("agent.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := filepath.Abs(".")
	a := file.Agent
	ro := a.Manifest.Entries["statements"].Mount
	tests := []struct {
		name string
		ok   bool
	}{
		{"the file's directory is this one", file.Dir == dir},
		{"the model is the scripted one by default", file.Model.Provider == "scripted"},
		{"the plan is plan.yaml beside the agent file", file.Model.Plan == filepath.Join(dir, "plan.yaml")},
		{"the artifact rules are rules.yaml beside it", file.Artifacts.Rules == filepath.Join(dir, "rules.yaml")},
		{"outputs are promoted to promoted/ beside it", file.Artifacts.To == filepath.Join(dir, "promoted")},
		{"the statements are mounted", ro != nil && ro.Src == "statements"},
		{"the statements mount is read-only", ro != nil && ro.IsReadOnly()},
		{"reconcile.py is copied in", a.Manifest.Entries["reconcile.py"].LocalFile != nil},
		{"output/ starts as an empty directory", a.Manifest.Entries["output"].Dir != nil},
		{"the network is off", file.Policy.Network.Mode == sandbox.NetworkNone},
		{"memory is capped at 512M", file.Policy.Resources.MemoryBytes == 512<<20},
		{"processes are capped at 256", file.Policy.Resources.Pids == 256},
		{"each command times out after 60s", file.Policy.Resources.ExecTimeout == 60*time.Second},
		{"the agent has shell and filesystem tools", len(a.Capabilities) == 2},
	}
	for _, tt := range tests {
		if !tt.ok {
			t.Errorf("%s: no", tt.name)
		}
	}
	if _, err := scripted.Load(file.Model.Plan); err != nil {
		t.Errorf("plan: %v", err)
	}
	if _, err := artifact.LoadRules(file.Artifacts.Rules); err != nil {
		t.Errorf("rules: %v", err)
	}
}
