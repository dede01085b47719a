package trace

import (
	"encoding/json"
	"time"

	"github.com/agentbox/agentbox/agent/model"
)

// auditRun emits the events of a reconciliation an auditor reviews: the
// agent lists the statements, tries to change one (refused: they are
// mounted read-only), is refused the network, writes its report with a
// patch, answers, and its outputs are promoted.
func auditRun(w *Writer) {
	t0 := time.Date(2026, 3, 31, 9, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	no := false
	settings := &model.Settings{Model: "gpt-4.1", Store: &no}
	tamperOut := "exit code: 2\nwall time: 3ms\noutput:\nsh: 1: cannot create statements/bank.csv: Permission denied\n"
	listing := "exit code: 0\nwall time: 2ms\noutput:\n"
	for _, f := range []string{"bank.csv", "invoices.csv", "ledger.csv", "notes-1.txt", "notes-2.txt", "notes-3.txt", "notes-4.txt", "notes-5.txt", "notes-6.txt", "notes-7.txt", "notes-8.txt", "notes-9.txt", "notes-10.txt", "notes-11.txt"} {
		listing += f + "\n"
	}
	patch := "*** Begin Patch\n*** Add File: output/report.md\n+# Q1 reconciliation\n+\n+3 discrepancies, see discrepancies.json.\n*** End Patch"
	for _, e := range []Event{
		{Time: at(0), Type: RunStart, Agent: "reconcile-auditor", Model: "openai-responses:gpt-4.1", Input: "Reconcile the Q1 statements"},
		{Time: at(4), Type: ModelRequest, Turn: 1, Items: 1, Tools: []string{"exec_command", "apply_patch"}, InstructionBytes: 41, InstructionsSHA256: "5c1e0a6f3b2d4e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f", Instructions: "You are an auditor.\n# Workspace\nstatements/ (read-only)", Settings: settings},
		{Time: at(900), Type: ModelResponse, Turn: 1, ResponseID: "resp_1", Model: "gpt-4.1", Calls: []string{"exec_command"}, Usage: &model.Usage{InputTokens: 812, OutputTokens: 25, TotalTokens: 837}, DurationMS: 896},
		{Time: at(901), Type: ToolCall, Turn: 1, Tool: "exec_command", CallID: "c1", Arguments: `{"cmd":"ls statements"}`},
		{Time: at(905), Type: SandboxExec, Turn: 1, Tool: "exec_command", CallID: "c1", Cmd: "ls statements", ExitCode: intp(0), DurationMS: 3},
		{Time: at(906), Type: ToolResult, Turn: 1, Tool: "exec_command", CallID: "c1", Output: listing, Bytes: len(listing), DurationMS: 5},
		{Time: at(910), Type: ModelRequest, Turn: 2, Items: 3, Tools: []string{"exec_command", "apply_patch"}, InstructionBytes: 41, InstructionsSHA256: "5c1e0a6f3b2d4e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f", Settings: settings},
		{Time: at(1700), Type: ModelResponse, Turn: 2, ResponseID: "resp_2", Model: "gpt-4.1", Calls: []string{"exec_command", "exec_command"}, Usage: &model.Usage{InputTokens: 900, OutputTokens: 40, TotalTokens: 940}, DurationMS: 790},
		{Time: at(1701), Type: ToolCall, Turn: 2, Tool: "exec_command", CallID: "c2", Arguments: `{"cmd":"echo fixed >> statements/bank.csv"}`},
		{Time: at(1705), Type: SandboxExec, Turn: 2, Tool: "exec_command", CallID: "c2", Cmd: "echo fixed >> statements/bank.csv", ExitCode: intp(2), DurationMS: 3},
		{Time: at(1706), Type: ToolResult, Turn: 2, Tool: "exec_command", CallID: "c2", Output: tamperOut, Bytes: len(tamperOut), DurationMS: 5},
		{Time: at(1707), Type: ToolCall, Turn: 2, Tool: "exec_command", CallID: "c3", Arguments: `{"cmd":"curl -sS https://example.com"}`},
		{Time: at(1830), Type: SandboxExec, Turn: 2, Tool: "exec_command", CallID: "c3", Cmd: "curl -sS https://example.com", ExitCode: intp(56), DurationMS: 120,
			Violations: []string{`egress refused: CONNECT "example.com:443": host example.com is not in the allow-list`}},
		{Time: at(1831), Type: ToolResult, Turn: 2, Tool: "exec_command", CallID: "c3", Output: "exit code: 56\noutput:\ncurl: (56) CONNECT tunnel failed, response 403\n", Bytes: 60, DurationMS: 124},
		{Time: at(1840), Type: ModelRequest, Turn: 3, Items: 7, Tools: []string{"exec_command", "apply_patch"}, InstructionBytes: 41, InstructionsSHA256: "5c1e0a6f3b2d4e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f", Settings: settings},
		{Time: at(2600), Type: ModelResponse, Turn: 3, ResponseID: "resp_3", Model: "gpt-4.1", Calls: []string{"apply_patch"}, Usage: &model.Usage{InputTokens: 1000, OutputTokens: 90, TotalTokens: 1090}, DurationMS: 758},
		{Time: at(2601), Type: ToolCall, Turn: 3, Tool: "apply_patch", CallID: "c4", Arguments: `{"input":` + quoteJSON(patch) + `}`},
		{Time: at(2610), Type: ToolResult, Turn: 3, Tool: "apply_patch", CallID: "c4", Output: "added output/report.md", Bytes: 22, DurationMS: 9},
		{Time: at(2620), Type: ModelRequest, Turn: 4, Items: 9, Tools: []string{"exec_command", "apply_patch"}, InstructionBytes: 41, InstructionsSHA256: "5c1e0a6f3b2d4e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f", Settings: settings},
		{Time: at(3300), Type: ModelResponse, Turn: 4, ResponseID: "resp_4", Model: "gpt-4.1", Text: "Three discrepancies found.", Usage: &model.Usage{InputTokens: 1100, OutputTokens: 12, TotalTokens: 1112}, DurationMS: 680},
		{Time: at(3301), Type: FinalOutput, Turn: 4, Output: "Three discrepancies found."},
		{Time: at(3400), Type: Promotion, Dest: "/srv/audit/promoted", Files: []PromotedFile{
			{Path: "output/report.md", SHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", Size: 61},
			{Path: "output/discrepancies.json", SHA256: "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752", Size: 412},
		}},
		{Time: at(3420), Type: RunEnd, Turns: 4, Usage: &model.Usage{InputTokens: 3812, OutputTokens: 167, TotalTokens: 3979}, DurationMS: 3420},
	} {
		if err := w.Emit(e); err != nil {
			panic(err)
		}
	}
}

func quoteJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
