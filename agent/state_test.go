package agent

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/agent/model"
	"github.com/agentbox/agentbox/sandbox"
)

// A run that stops on an approval nobody is there to give continues, in a
// new process, from its saved state: the conversation is kept, the
// pending call runs once approved, and the model picks up where it was.
func TestARunWaitingForApprovalResumesFromItsState(t *testing.T) {
	ws := t.TempDir()
	var saved []byte
	checkpoint := func(st *RunState) {
		b, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		saved = b
	}
	first := &stepModel{next: func(_ context.Context, turn int, _ model.Request) (*model.Response, error) {
		return &model.Response{Output: []model.Item{
			{Type: model.ItemFunctionCall, CallID: "c1", Name: "write_file", Arguments: `{"path":"a.txt","content":"kept\n"}`},
			{Type: model.ItemFunctionCall, CallID: "c2", Name: "exec_command", Arguments: `{"cmd":"cat a.txt"}`},
		}, Usage: model.Usage{TotalTokens: 5}}, nil
	}}
	wait := ApproverFunc(func(context.Context, Call) (bool, error) { return false, ErrApprovalPending })
	rules := []ApprovalRule{{Tool: "exec_command"}}
	a := &SandboxAgent{Name: "auditor", Model: first}
	_, err := (&Runner{}).Run(context.Background(), a, "read a.txt", RunConfig{
		Sandbox: SandboxConfig{Client: newClient(t), Spec: sandbox.Spec{Workspace: ws}}, Approvals: rules, Approver: wait, Checkpoint: checkpoint})
	if !errors.Is(err, ErrApprovalPending) {
		t.Fatalf("first run: %v, want ErrApprovalPending", err)
	}

	st, ok, err := UnmarshalRunState(saved)
	if err != nil || !ok {
		t.Fatalf("saved state: %v (a run state: %v)\n%s", err, ok, saved)
	}
	if st.Turns != 1 || st.Done || len(st.Pending) != 1 || st.Pending[0].CallID != "c2" || st.Session.ID == "" || st.Usage.TotalTokens != 5 {
		t.Fatalf("saved state %+v", st)
	}

	var asked []Call
	approve := ApproverFunc(func(_ context.Context, c Call) (bool, error) { asked = append(asked, c); return true, nil })
	second := &stepModel{next: func(_ context.Context, _ int, _ model.Request) (*model.Response, error) {
		return &model.Response{Output: []model.Item{{Type: model.ItemMessage, Role: model.RoleAssistant, Text: "it says kept"}}, Usage: model.Usage{TotalTokens: 3}}, nil
	}}
	a.Model = second
	res, err := (&Runner{}).Run(context.Background(), a, "", RunConfig{
		Sandbox: SandboxConfig{Client: newClient(t)}, Resume: st, Approvals: rules, Approver: approve, Checkpoint: checkpoint})
	if err != nil {
		t.Fatalf("resumed run: %v", err)
	}
	if len(asked) != 1 || asked[0].CallID != "c2" {
		t.Errorf("approval asked for %+v, want the pending call once", asked)
	}
	if res.FinalOutput != "it says kept" || res.Turns != 2 || res.Usage.TotalTokens != 8 {
		t.Errorf("resumed result: %q after %d turns, %d tokens", res.FinalOutput, res.Turns, res.Usage.TotalTokens)
	}
	req := second.requests()[0]
	outs := outputs(req)
	if req.Input[0].Text != "read a.txt" || len(outs) != 2 || !strings.Contains(outs[1], "kept") {
		t.Errorf("the resumed model did not get the whole conversation with the pending call's output: %+v", req.Input)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "a.txt")); err != nil || string(b) != "kept\n" {
		t.Errorf("the workspace was not kept across the runs: %q %v", b, err)
	}
	if st, _, _ := UnmarshalRunState(saved); st == nil || !st.Done {
		t.Errorf("the last checkpoint does not say the run is done: %s", saved)
	}
}

func TestResumingIsRefusedForAnotherTaskOrAFinishedRun(t *testing.T) {
	a := &SandboxAgent{Name: "auditor", Model: plan("x")}
	for _, tt := range []struct {
		name, task string
		st         RunState
		want       string
	}{
		{"a finished run", "", RunState{Agent: "auditor", Task: "t", Done: true}, "already gave its final answer"},
		{"another task", "other", RunState{Agent: "auditor", Task: "t"}, `task "t", not "other"`},
		{"another agent's run", "", RunState{Agent: "coder", Task: "t"}, `agent "coder"'s`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := (&Runner{}).Run(context.Background(), a, tt.task, RunConfig{Sandbox: SandboxConfig{Client: newClient(t)}, Resume: &tt.st})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
		})
	}
}
