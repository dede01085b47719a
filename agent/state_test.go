package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/agent/model"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/trace"
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

// A run stopped while a command runs (killed, or cancelled as by Ctrl-C)
// leaves a state that says the command had begun. The run resumed from
// it does not run the command a second time: its side effect happens
// once, the model reads that the call was interrupted, the trace records
// it, and the turn's call that had not begun runs (approval asked again).
func TestAResumedRunDoesNotRunAgainACallThatHadBegun(t *testing.T) {
	for _, tt := range []struct {
		name string
		// killed resumes from the state saved when the command was
		// running (what a SIGKILL leaves); otherwise from the last
		// state the cancelled run saved.
		killed bool
	}{
		{"killed during the command", true},
		{"cancelled during the command", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ws := t.TempDir()
			var mu sync.Mutex
			var saved []byte
			checkpoint := func(st *RunState) {
				b, err := json.Marshal(st)
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				saved = b
				mu.Unlock()
			}
			last := func() []byte { mu.Lock(); defer mu.Unlock(); return saved }
			// The command appends its line, then waits for the test.
			first := &stepModel{next: func(context.Context, int, model.Request) (*model.Response, error) {
				return &model.Response{Output: []model.Item{
					{Type: model.ItemFunctionCall, CallID: "c1", Name: "exec_command", Arguments: `{"cmd":"echo once >> log.txt; while [ ! -e go ]; do sleep 0.05; done"}`},
					{Type: model.ItemFunctionCall, CallID: "c2", Name: "exec_command", Arguments: `{"cmd":"echo two >> second.txt"}`},
				}}, nil
			}}
			var asked []string
			approve := ApproverFunc(func(_ context.Context, c Call) (bool, error) { asked = append(asked, c.CallID); return true, nil })
			rules := []ApprovalRule{{Tool: "exec_command"}}
			a := &SandboxAgent{Name: "coder", Model: first}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, err := (&Runner{}).Run(ctx, a, "append once", RunConfig{
					Sandbox: SandboxConfig{Client: newClient(t), Spec: sandbox.Spec{Workspace: ws}}, Approvals: rules, Approver: approve, Checkpoint: checkpoint})
				done <- err
			}()
			deadline := time.Now().Add(30 * time.Second)
			for {
				if b, _ := os.ReadFile(filepath.Join(ws, "log.txt")); len(b) > 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the command never ran")
				}
				time.Sleep(10 * time.Millisecond)
			}
			atKill := last()
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("first run: %v, want it cancelled", err)
			}
			// Let a command run again by the resumed run finish at once.
			if err := os.WriteFile(filepath.Join(ws, "go"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			data := last()
			if tt.killed {
				data = atKill
			}
			st, ok, err := UnmarshalRunState(data)
			if err != nil || !ok {
				t.Fatalf("saved state: %v\n%s", err, data)
			}
			if len(st.Started) != 1 || st.Started[0].CallID != "c1" || len(st.Pending) != 1 || st.Pending[0].CallID != "c2" {
				t.Fatalf("the saved state does not say c1 began and c2 did not: started %+v, pending %+v", st.Started, st.Pending)
			}

			asked = nil
			var buf bytes.Buffer
			second := plan("checked")
			a.Model = second
			res, err := (&Runner{}).Run(context.Background(), a, "", RunConfig{
				Sandbox: SandboxConfig{Client: newClient(t)}, Resume: st, Approvals: rules, Approver: approve, Trace: trace.New(&buf)})
			if err != nil {
				t.Fatalf("resumed run: %v", err)
			}
			if b, _ := os.ReadFile(filepath.Join(ws, "log.txt")); string(b) != "once\n" {
				t.Errorf("log.txt = %q: the command that had begun ran again", b)
			}
			if b, _ := os.ReadFile(filepath.Join(ws, "second.txt")); string(b) != "two\n" {
				t.Errorf("second.txt = %q: the call that had not begun did not run once", b)
			}
			if !slices.Equal(asked, []string{"c2"}) {
				t.Errorf("approval asked for %v, want only the call that had not begun", asked)
			}
			outs := outputs(second.requests()[0])
			if res.FinalOutput != "checked" || len(outs) != 2 || outs[0] != interruptedOutput {
				t.Errorf("the model did not read that c1 was interrupted: %q", outs)
			}
			var marked []string
			for _, e := range readTrace(t, &buf) {
				if e.Type == trace.ToolResult && e.Interrupted {
					marked = append(marked, e.CallID)
				}
			}
			if !slices.Equal(marked, []string{"c1"}) {
				t.Errorf("the trace marks %v interrupted, want [c1]", marked)
			}
		})
	}
}

// A state written before calls were marked as begun (version 1) still
// loads, and its unanswered calls are pending, as that format meant.
func TestAVersion1RunStateStillLoads(t *testing.T) {
	data := []byte(`{"kind":"agentbox-run-state","version":1,"agent":"a","task":"t","turns":1,
		"items":[{"type":"message","role":"user","text":"t"},{"type":"function_call","call_id":"c1","name":"exec_command","arguments":"{}"}],
		"pending":[{"type":"function_call","call_id":"c1","name":"exec_command","arguments":"{}"}],"session":{}}`)
	st, ok, err := UnmarshalRunState(data)
	if err != nil || !ok || len(st.Pending) != 1 || len(st.Started) != 0 {
		t.Fatalf("version 1 state: %+v, %v, %v", st, ok, err)
	}
}

// A run cancelled after a call was approved but before its tool ran
// leaves the call not begun: the resumed run runs it (approval asked
// again) rather than answering it as interrupted.
func TestACallCancelledBeforeItRanIsNotMarkedBegun(t *testing.T) {
	ws := t.TempDir()
	var saved *RunState
	m := &stepModel{next: func(context.Context, int, model.Request) (*model.Response, error) {
		return &model.Response{Output: []model.Item{
			{Type: model.ItemFunctionCall, CallID: "c1", Name: "exec_command", Arguments: `{"cmd":"echo ran >> log.txt"}`},
		}}, nil
	}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The user approves, and the run is cancelled as the answer comes.
	approve := ApproverFunc(func(context.Context, Call) (bool, error) { cancel(); return true, nil })
	_, err := (&Runner{}).Run(ctx, &SandboxAgent{Name: "coder", Model: m}, "append", RunConfig{
		Sandbox:   SandboxConfig{Client: newClient(t), Spec: sandbox.Spec{Workspace: ws}},
		Approvals: []ApprovalRule{{Tool: "exec_command"}}, Approver: approve,
		Checkpoint: func(st *RunState) { saved = st }})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("run: %v, want it cancelled", err)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "log.txt")); err == nil {
		t.Fatalf("the command ran in a cancelled run: %q", b)
	}
	if saved == nil || len(saved.Started) != 0 || len(saved.Pending) != 1 || saved.Pending[0].CallID != "c1" {
		t.Fatalf("the saved state does not leave c1 pending: %+v", saved)
	}
}
