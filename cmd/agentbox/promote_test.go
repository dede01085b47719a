package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
		{"refuses a destination it would overwrite", []string{"--from", ws, "--rules", rules, "--to", filepath.Join(dir, "res")}, exitCode,
			[]string{"already has out/report.md"}},
		{"needs all three paths", []string{"--from", ws}, exitCode, []string{"--from, --rules and --to are all required"}},
		{"reports a missing rules file", []string{"--from", ws, "--rules", filepath.Join(dir, "nope.yaml"), "--to", filepath.Join(dir, "x")}, exitCode, []string{"nope.yaml"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := newPromoteCmd()
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			cmd.SetArgs(tt.args)
			err := cmd.Execute()
			code := 0
			if err != nil {
				var ee *exitError
				if !errors.As(err, &ee) {
					t.Fatalf("error %v is not an exitError", err)
				}
				code = ee.code
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
