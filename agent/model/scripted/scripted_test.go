package scripted_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/agent/model"
	"github.com/agentbox/agentbox/agent/model/scripted"
)

const auditPlan = `steps:
  - call: {tool: exec_command, arguments: {cmd: "ls statements"}}
    expect: {output_contains: bank.csv, exit_code: 0}
  - calls:
      - {tool: exec_command, arguments: {cmd: "echo x >> statements/bank.csv"}}
      - tool: read_file
        arguments: {path: statements/bank.csv}
    expect:
      output_not_contains: [SECRET]
  - final: "Listed: {{output:1}}"
`

// play runs m like a runner would, answering each call with answer.
func play(t *testing.T, m model.Model, answer func(call model.Item) string) (*model.Response, []model.Item, error) {
	t.Helper()
	req := model.Request{Instructions: "be an auditor", Input: []model.Item{{Type: model.ItemMessage, Role: model.RoleUser, Text: "reconcile"}}}
	for turn := 0; turn < 10; turn++ {
		resp, err := m.Respond(context.Background(), req)
		if err != nil {
			return nil, req.Input, err
		}
		calls := resp.Calls()
		if len(calls) == 0 {
			return resp, req.Input, nil
		}
		for _, c := range calls {
			req.Input = append(req.Input, c, model.Item{Type: model.ItemFunctionCallOutput, CallID: c.CallID, Output: answer(c)})
		}
	}
	t.Fatal("the plan never ended")
	return nil, nil, nil
}

func shellAnswer(code, out string) func(model.Item) string {
	return func(model.Item) string { return "exit code: " + code + "\nwall time: 1ms\noutput:\n" + out }
}

func TestPlayingAPlan(t *testing.T) {
	m, err := scripted.Parse([]byte(auditPlan))
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	resp, input, err := play(t, m, func(c model.Item) string {
		seen = append(seen, c.Name+" "+c.Arguments)
		return "exit code: 0\noutput:\nbank.csv\nledger.csv\n"
	})
	if err != nil {
		t.Fatalf("play: %v", err)
	}
	want := []string{
		`exec_command {"cmd":"ls statements"}`,
		`exec_command {"cmd":"echo x >> statements/bank.csv"}`,
		`read_file {"path":"statements/bank.csv"}`,
	}
	if strings.Join(seen, "\n") != strings.Join(want, "\n") {
		t.Errorf("calls = %q, want %q", seen, want)
	}
	if got := resp.Text(); got != "Listed: bank.csv\nledger.csv" {
		t.Errorf("final = %q", got)
	}
	if resp.Usage != (model.Usage{}) {
		t.Errorf("usage = %+v; a scripted plan uses no tokens and must not report made-up ones", resp.Usage)
	}
	if m.Name() != "scripted:plan" {
		t.Errorf("Name() = %q", m.Name())
	}

	t.Run("usage is the same on a second run", func(t *testing.T) {
		resp2, _, err := play(t, m, func(model.Item) string { return "exit code: 0\noutput:\nbank.csv\nledger.csv\n" })
		if err != nil {
			t.Fatal(err)
		}
		if resp2.Usage != resp.Usage {
			t.Errorf("usage %+v then %+v", resp.Usage, resp2.Usage)
		}
	})
	t.Run("a conversation resumed midway continues with the next step", func(t *testing.T) {
		resumed := input[:3] // user message, first call, its output
		r, err := m.Respond(context.Background(), model.Request{Input: resumed})
		if err != nil {
			t.Fatal(err)
		}
		if calls := r.Calls(); len(calls) != 2 || calls[1].Name != "read_file" {
			t.Errorf("resumed turn = %+v", r.Output)
		}
	})
}

func TestExpectationsFailLoudly(t *testing.T) {
	tests := []struct {
		name   string
		plan   string
		answer func(model.Item) string
		want   []string
	}{
		{
			name:   "missing text names the step, its line and what came back",
			plan:   "steps:\n  - call: {tool: exec_command, arguments: {cmd: ls}}\n    expect: {output_contains: invoices.csv}\n  - final: done\n",
			answer: shellAnswer("0", "bank.csv\n"),
			want:   []string{"step 1 (line 2)", `to contain "invoices.csv"`, "bank.csv"},
		},
		{
			name:   "forbidden text is reported",
			plan:   "- call: {tool: exec_command, arguments: {cmd: env}}\n  expect: {output_not_contains: OPENAI_API_KEY}\n- final: done\n",
			answer: shellAnswer("0", "OPENAI_API_KEY=sk-123\n"),
			want:   []string{"step 1 (line 1)", "not to contain"},
		},
		{
			name:   "a wrong exit code is reported with both codes",
			plan:   "- call: {tool: exec_command, arguments: {cmd: 'false'}}\n  expect: {exit_code: 0}\n- final: done\n",
			answer: shellAnswer("1", ""),
			want:   []string{"exit with 0, it exited with 1"},
		},
		{
			name:   "a command that should fail but succeeded is reported",
			plan:   "- call: {tool: exec_command, arguments: {cmd: 'echo x >> statements/bank.csv'}}\n  expect: {failed: true}\n- final: done\n",
			answer: shellAnswer("0", ""),
			want:   []string{"to fail, it exited with 0"},
		},
		{
			name:   "an output without an exit code cannot satisfy exit_code",
			plan:   "- call: {tool: read_file, arguments: {path: a}}\n  expect: {exit_code: 0}\n- final: done\n",
			answer: func(model.Item) string { return "hello" },
			want:   []string{"to report an exit code"},
		},
		{
			name:   "a plan without a final answer is exhausted",
			plan:   "- call: {tool: exec_command, arguments: {cmd: ls}}\n- call: {tool: exec_command, arguments: {cmd: pwd}}\n",
			answer: shellAnswer("0", ""),
			want:   []string{"scripted plan plan exhausted after step 2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := scripted.Parse([]byte(tt.plan))
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = play(t, m, tt.answer)
			if err == nil {
				t.Fatal("the plan passed")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
	t.Run("a failed expectation is a StepError", func(t *testing.T) {
		m, _ := scripted.Parse([]byte("- call: {tool: t}\n  expect: {failed: false}\n- final: x\n"))
		_, _, err := play(t, m, shellAnswer("3", ""))
		var se *scripted.StepError
		if !errors.As(err, &se) || se.Step != 1 || se.Line != 1 {
			t.Errorf("error %#v is not StepError{Step: 1, Line: 1}", err)
		}
	})
	t.Run("expectations that hold let the plan go on", func(t *testing.T) {
		m, _ := scripted.Parse([]byte("- call: {tool: exec_command, arguments: {cmd: x}}\n  expect: {failed: true, output_contains: Read-only}\n- final: ok\n"))
		resp, _, err := play(t, m, shellAnswer("2", "sh: 1: cannot create statements/bank.csv: Read-only file system\n"))
		if err != nil || resp.Text() != "ok" {
			t.Errorf("resp %v, err %v", resp, err)
		}
	})
}

func TestBadPlansAreRefusedWithTheirLine(t *testing.T) {
	tests := []struct {
		name string
		plan string
		want string
	}{
		{"an unknown step key", "steps:\n  - call: {tool: a}\n  - finale: done\n", "line 3"},
		{"an unknown call key", "steps:\n  - call:\n      tool: a\n      args: {x: 1}\n", "line 4"},
		{"an unknown expect key", "- call: {tool: a}\n  expect: {exit: 1}\n", "line 2"},
		{"an unknown top-level key", "name: x\nsteps: []\n", "line 1"},
		{"a step with a call and a final", "- call: {tool: a}\n  final: b\n", "exactly one of call, calls or final"},
		{"a call without a tool", "- call: {arguments: {x: 1}}\n", "tool is required"},
		{"an expect on a final answer", "- final: a\n  expect: {exit_code: 0}\n", "a final answer has none"},
		{"steps after a final answer", "- final: a\n- final: b\n", "steps follow it"},
		{"an empty expect", "- call: {tool: a}\n  expect: {}\n- final: x\n", "expect is empty"},
		{"a template naming a later step", "- final: '{{output:2}}'\n", "does not name an earlier step"},
		{"an empty plan", "", "empty plan"},
		{"no steps", "steps: []\n", "no steps"},
		{"a plan that is not YAML", "steps: [\n", "scripted plan plan:"},
	}
	for _, tt := range tests {
		t.Run(tt.name+" is refused", func(t *testing.T) {
			_, err := scripted.ParsePlan([]byte(tt.plan))
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
		})
	}
}

func TestLoadNamesTheFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "plan.yaml")
	if err := os.WriteFile(path, []byte("- call: {tool: a}\n  nope: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := scripted.Load(path)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("error = %v", err)
	}
	if _, err := scripted.Load(filepath.Join(dir, "missing.yaml")); err == nil {
		t.Error("a missing plan was accepted")
	}
	os.WriteFile(path, []byte("- final: hi\n"), 0o644)
	m, err := scripted.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if m.Name() != "scripted:plan.yaml" {
		t.Errorf("Name() = %q", m.Name())
	}
}

func TestNewPlaysAPlanBuiltInCode(t *testing.T) {
	m := scripted.New(scripted.Plan{Source: "inline", Steps: []scripted.Step{
		{Calls: []scripted.Call{{Tool: "list_dir", Arguments: []byte(`{"path":"."}`)}}},
		{IsFinal: true, Final: "saw {{output:1}}"},
	}})
	resp, _, err := play(t, m, func(model.Item) string { return "a b" })
	if err != nil || resp.Text() != "saw a b" {
		t.Errorf("resp %v err %v", resp, err)
	}
}
