package harness

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/cli"

	"github.com/agentbox/agentbox/sandbox"
)

func TestPromoteCommand(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	if err := os.MkdirAll(filepath.Join(ws, "out"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(p, c string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(ws, "out/report.md"), "# Report\n")
	rules := filepath.Join(dir, "rules.yaml")
	write(rules, "outputs:\n  - glob: out/*.md\n    required: true\n    types: [text/markdown]\n")

	tests := []struct {
		name     string
		args     []string
		wantCode int
		want     []string
	}{
		{"promotes and lists sizes and hashes", []string{"--from", ws, "--rules", rules, "--to", filepath.Join(dir, "res"), "--run-id", "r1"}, 0,
			[]string{"out/report.md", "9", "text/markdown", "promoted 1 file(s)"}},
		{"refuses a destination it would overwrite", []string{"--from", ws, "--rules", rules, "--to", filepath.Join(dir, "res")}, cli.ExitFailure,
			[]string{"already has out/report.md"}},
		{"needs all three paths", []string{"--from", ws}, cli.ExitFailure, []string{"--from, --rules and --to are all required"}},
		{"reports a missing rules file", []string{"--from", ws, "--rules", filepath.Join(dir, "nope.yaml"), "--to", filepath.Join(dir, "x")}, cli.ExitFailure, []string{"nope.yaml"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := Promote(cli.New())
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			cmd.SetArgs(tt.args)
			err := cmd.Execute()
			code := 0
			if err != nil {
				var ee *cli.ExitError
				if !errors.As(err, &ee) {
					t.Fatalf("error %v is not an ExitError", err)
				}
				code = ee.Code
				out.WriteString(err.Error())
			}
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d (%s)", code, tt.wantCode, out.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}

func TestPromoteFromASessionStateFileUsesItsWorkspace(t *testing.T) {
	ws := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, "out"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "out", "report.md"), []byte("# Report\n\nAll good.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	data, err := sandbox.MarshalState(sandbox.State{Version: sandbox.StateVersion, Backend: "linux", ID: "abc", Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	stateFile := filepath.Join(t.TempDir(), "state.json")
	if err := os.WriteFile(stateFile, data, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := promoteSourceDir(stateFile)
	if err != nil || got != ws {
		t.Fatalf("promoteSourceDir(state) = %q, %v; want %q", got, err, ws)
	}
	if err := os.RemoveAll(ws); err != nil {
		t.Fatal(err)
	}
	if _, err := promoteSourceDir(stateFile); err == nil || !strings.Contains(err.Error(), "gone") {
		t.Fatalf("a state whose workspace is gone: %v, want an error saying so", err)
	}
	junk := filepath.Join(t.TempDir(), "junk.txt")
	if err := os.WriteFile(junk, []byte("not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := promoteSourceDir(junk); err == nil || !strings.Contains(err.Error(), "neither a directory nor a session state") {
		t.Fatalf("a junk file: %v", err)
	}
}
