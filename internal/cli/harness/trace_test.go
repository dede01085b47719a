package harness

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/cli"
	"github.com/agentbox/agentbox/trace"
)

func TestTraceShow(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "run.jsonl")
	tw, err := trace.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	code := 2
	for _, e := range []trace.Event{
		{Type: trace.RunStart, Agent: "auditor", Input: "reconcile"},
		{Type: trace.ToolCall, Turn: 1, Tool: "exec_command", CallID: "c1", Arguments: `{"cmd":"echo x >> statements/bank.csv"}`},
		{Type: trace.SandboxExec, Turn: 1, Tool: "exec_command", CallID: "c1", Cmd: "echo x >> statements/bank.csv", ExitCode: &code},
		{Type: trace.ToolResult, Turn: 1, Tool: "exec_command", CallID: "c1", Output: "exit code: 2\noutput:\nsh: 1: cannot create statements/bank.csv: Permission denied\n"},
		{Type: trace.RunEnd, Turns: 1},
	} {
		if err := tw.Emit(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(dir, "run.html")
	for _, tt := range []struct {
		name string
		args []string
		file string
		want string
	}{
		{"the timeline says why a command failed", []string{path}, "", "│ sh: 1: cannot create statements/bank.csv: Permission denied"},
		{"--html writes a page to the file -o names", []string{"--html", "-o", page, path}, page, "<!DOCTYPE html>"},
		{"--json prints the events", []string{"--json", path}, "", `"type": "sandbox_exec"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cmd := Trace(cli.New())
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			cmd.SetArgs(append([]string{"show"}, tt.args...))
			if err := cmd.Execute(); err != nil {
				t.Fatalf("trace show: %v", err)
			}
			got := out.String()
			if tt.file != "" {
				data, err := os.ReadFile(tt.file)
				if err != nil {
					t.Fatal(err)
				}
				got = string(data)
			}
			if !strings.Contains(got, tt.want) {
				t.Errorf("output lacks %q:\n%s", tt.want, got)
			}
		})
	}
}
