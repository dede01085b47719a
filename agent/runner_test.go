package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/agent/model"
	"github.com/agentbox/agentbox/manifest"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/trace"
)

func TestRunnerDispatchesToolCallsAndRecovers(t *testing.T) {
	tests := []struct {
		name  string
		call  model.Item
		wants []string
	}{
		{"a command's output and exit code reach the model", call("exec_command", map[string]any{"cmd": "echo hello; exit 3"}), []string{"exit code: 3", "hello"}},
		{"an argv command runs without a shell", call("exec_command", map[string]any{"cmd": []string{"printf", "%s-%s", "a", "b"}}), []string{"exit code: 0", "a-b"}},
		{"malformed JSON arguments become a tool error the model can read", call("exec_command", `{"cmd": "echo`), []string{"error: the arguments of exec_command are not valid JSON"}},
		{"arguments of the wrong shape become a tool error", call("exec_command", `{"command": "ls"}`), []string{"error: exec_command: arguments are not valid"}},
		{"an unknown tool becomes a tool error listing the real ones", call("rm_rf", `{}`), []string{`error: unknown tool "rm_rf"`, "exec_command", "apply_patch"}},
		{"write_file then read_file round-trips through the session", call("write_file", map[string]any{"path": "a/b.txt", "content": "x\ny\n"}), []string{"wrote 4 bytes to a/b.txt"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClient(t)
			m := plan("done", tt.call)
			res, err := (&Runner{}).Run(context.Background(), &SandboxAgent{Name: "t", Model: m}, "go", RunConfig{Sandbox: SandboxConfig{Client: c}})
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			if res.FinalOutput != "done" || res.Turns != 2 {
				t.Fatalf("final %q after %d turns, want done after 2", res.FinalOutput, res.Turns)
			}
			outs := outputs(m.requests()[1])
			if len(outs) != 1 {
				t.Fatalf("second request has %d tool outputs, want 1", len(outs))
			}
			for _, w := range tt.wants {
				if !strings.Contains(outs[0], w) {
					t.Errorf("tool output %q does not contain %q", outs[0], w)
				}
			}
			if n := c.only(t).closed(); n != 1 {
				t.Errorf("session closed %d times, want 1", n)
			}
			if res.Usage.TotalTokens != 23 {
				t.Errorf("usage total %d, want 23", res.Usage.TotalTokens)
			}
		})
	}
}

func TestRunnerEndsAndCleansUp(t *testing.T) {
	loop := func() *stepModel {
		return &stepModel{next: func(context.Context, int, model.Request) (*model.Response, error) {
			return &model.Response{Output: []model.Item{call("exec_command", map[string]any{"cmd": "true"})}}, nil
		}}
	}
	modelDown := &stepModel{next: func(context.Context, int, model.Request) (*model.Response, error) {
		return nil, &model.Error{Provider: "openai-responses", BaseURL: "http://127.0.0.1:9", Err: errors.New("connection refused")}
	}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cancelling := &stepModel{next: func(ctx context.Context, turn int, _ model.Request) (*model.Response, error) {
		if turn == 2 {
			cancel()
			return nil, ctx.Err()
		}
		return &model.Response{Output: []model.Item{call("exec_command", map[string]any{"cmd": "true"})}}, nil
	}}
	tests := []struct {
		name    string
		ctx     context.Context
		m       *stepModel
		wantErr error
		wantMsg string
	}{
		{"the turn limit is a typed error", context.Background(), loop(), ErrMaxTurns, "limit 3"},
		{"a model that is down names its base URL", context.Background(), modelDown, nil, "http://127.0.0.1:9"},
		{"a cancelled context ends the run", ctx, cancelling, context.Canceled, "turn 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name+" and the created session is closed", func(t *testing.T) {
			c := newClient(t)
			var buf bytes.Buffer
			tw := trace.New(&buf)
			res, err := (&Runner{}).Run(tt.ctx, &SandboxAgent{Name: "t", Model: tt.m, MaxTurns: 3}, "go", RunConfig{Sandbox: SandboxConfig{Client: c}, Trace: tw})
			if err == nil {
				t.Fatal("run succeeded, want an error")
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("error %v is not %v", err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("error %q does not mention %q", err, tt.wantMsg)
			}
			if n := c.only(t).closed(); n != 1 {
				t.Errorf("session closed %d times, want 1", n)
			}
			if res == nil || res.State.ID == "" {
				t.Errorf("result carries no session state: %+v", res)
			}
			evs := readTrace(t, &buf)
			last := evs[len(evs)-1]
			if last.Type != trace.RunEnd || evs[len(evs)-2].Type != trace.Error {
				t.Errorf("trace ends with %s, %s; want error, run_end", evs[len(evs)-2].Type, last.Type)
			}
			if !strings.Contains(evs[len(evs)-2].Err, tt.wantMsg) {
				t.Errorf("trace error %q does not mention %q", evs[len(evs)-2].Err, tt.wantMsg)
			}
		})
	}
}

func TestRunnerNeverClosesAnInjectedSession(t *testing.T) {
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprintf("when the run fails=%v", fail), func(t *testing.T) {
			sess := liveSession(t)
			m := &stepModel{next: func(_ context.Context, turn int, _ model.Request) (*model.Response, error) {
				if fail {
					return nil, errors.New("boom")
				}
				return &model.Response{Output: []model.Item{{Type: model.ItemMessage, Role: model.RoleAssistant, Text: "ok"}}}, nil
			}}
			_, err := (&Runner{}).Run(context.Background(), &SandboxAgent{Model: m}, "go", RunConfig{Sandbox: SandboxConfig{Session: sess}})
			if (err != nil) != fail {
				t.Fatalf("run error %v, want failure=%v", err, fail)
			}
			if n := sess.closed(); n != 0 {
				t.Fatalf("injected session closed %d times, want 0", n)
			}
			if _, err := sandbox.Exec(context.Background(), sess, sandbox.ExecRequest{Cmd: []string{"true"}}); err != nil {
				t.Fatalf("injected session unusable after the run: %v", err)
			}
		})
	}
}

func TestInstructionsAreBuiltInOrder(t *testing.T) {
	m := &manifest.Manifest{Entries: map[string]manifest.Entry{
		"data/statement.csv": {File: &manifest.File{Content: "a,b\n"}},
	}}
	tests := []struct {
		name  string
		agent SandboxAgent
		order []string
	}{
		{"the sandbox prompt, agent instructions, capability fragments, then the tree", SandboxAgent{Instructions: "RECONCILE THE BOOKS", Manifest: m},
			[]string{"inside a confined sandbox", "RECONCILE THE BOOKS", "# Files", "# Shell", "# Context", "# Workspace", "statement.csv"}},
		{"base instructions replace the sandbox prompt", SandboxAgent{BaseInstructions: "CUSTOM BASE", Instructions: "MINE", Manifest: m},
			[]string{"CUSTOM BASE", "MINE", "# Files", "statement.csv"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mod := plan("ok")
			a := tt.agent
			a.Model = mod
			if _, err := (&Runner{}).Run(context.Background(), &a, "go", RunConfig{Sandbox: SandboxConfig{Client: newClient(t)}}); err != nil {
				t.Fatal(err)
			}
			ins := mod.requests()[0].Instructions
			pos := -1
			for _, w := range tt.order {
				i := strings.Index(ins, w)
				if i < 0 {
					t.Fatalf("instructions lack %q:\n%s", w, ins)
				}
				if i < pos {
					t.Fatalf("%q comes before the previous part:\n%s", w, ins)
				}
				pos = i
			}
			if a.BaseInstructions != "" && strings.Contains(ins, "inside a confined sandbox") {
				t.Error("the built-in prompt is still there with base instructions")
			}
		})
	}
}

func TestApprovals(t *testing.T) {
	rules := []ApprovalRule{{Tool: "exec_command", Match: regexp.MustCompile(`\brm\b`)}}
	tests := []struct {
		name     string
		approver Approver
		cmd      string
		want     string
		asked    bool
	}{
		{"a matching call runs when approved", ApproverFunc(func(context.Context, Call) (bool, error) { return true, nil }), "echo rm-ok; rm -f nothing", "rm-ok", true},
		{"a matching call is denied by the user", ApproverFunc(func(context.Context, Call) (bool, error) { return false, nil }), "rm -f x", "denied by the user", true},
		{"with no approver a matching call is denied and says why", nil, "rm -f x", "no approver is configured", false},
		{"a call no rule matches runs without asking", ApproverFunc(func(context.Context, Call) (bool, error) { return false, nil }), "echo fine", "fine", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			asked := false
			ap := tt.approver
			if ap != nil {
				inner := ap
				ap = ApproverFunc(func(ctx context.Context, c Call) (bool, error) {
					asked = true
					if c.Subject != tt.cmd || c.Tool != "exec_command" {
						t.Errorf("approver got %+v", c)
					}
					return inner.Approve(ctx, c)
				})
			}
			m := plan("done", call("exec_command", map[string]any{"cmd": tt.cmd}))
			var got []Event
			_, err := (&Runner{}).Run(context.Background(), &SandboxAgent{Model: m}, "go", RunConfig{
				Sandbox: SandboxConfig{Client: newClient(t)}, Approvals: rules, Approver: ap,
				OnEvent: func(e Event) { got = append(got, e) },
			})
			if err != nil {
				t.Fatal(err)
			}
			if out := outputs(m.requests()[1])[0]; !strings.Contains(out, tt.want) {
				t.Errorf("output %q does not contain %q", out, tt.want)
			}
			if asked != tt.asked {
				t.Errorf("approver asked=%v, want %v", asked, tt.asked)
			}
		})
	}
}

func TestApproverErrorEndsTheRun(t *testing.T) {
	c := newClient(t)
	m := plan("done", call("exec_command", map[string]any{"cmd": "ls"}))
	_, err := (&Runner{}).Run(context.Background(), &SandboxAgent{Model: m}, "go", RunConfig{
		Sandbox:   SandboxConfig{Client: c},
		Approvals: []ApprovalRule{{Tool: "*"}},
		Approver:  ApproverFunc(func(context.Context, Call) (bool, error) { return false, errors.New("terminal gone") }),
	})
	if err == nil || !strings.Contains(err.Error(), "terminal gone") {
		t.Fatalf("error %v, want the approver's", err)
	}
	if c.only(t).closed() != 1 {
		t.Error("session not closed")
	}
}

func TestLongOutputIsTruncatedWithAMarker(t *testing.T) {
	m := plan("done", call("exec_command", map[string]any{"cmd": "head -c 200000 /dev/zero | tr '\\0' x; echo; echo TAIL", "max_output_tokens": 1000}))
	if _, err := (&Runner{}).Run(context.Background(), &SandboxAgent{Model: m}, "go", RunConfig{Sandbox: SandboxConfig{Client: newClient(t)}}); err != nil {
		t.Fatal(err)
	}
	out := outputs(m.requests()[1])[0]
	if !regexp.MustCompile(`…\[truncated \d+ bytes\]…`).MatchString(out) {
		t.Errorf("no truncation marker in %d bytes of output", len(out))
	}
	if !strings.Contains(out, "TAIL") || !strings.Contains(out, "exit code: 0") {
		t.Errorf("head or tail lost: %.200q", out)
	}
	if len(out) > 4200 {
		t.Errorf("output is %d bytes, want about 4000", len(out))
	}
}

func TestTraceRecordsEveryStep(t *testing.T) {
	var buf bytes.Buffer
	tw := trace.New(&buf)
	m := plan("all done", call("exec_command", map[string]any{"cmd": "echo checked; exit 7"}))
	res, err := (&Runner{}).Run(context.Background(), &SandboxAgent{Name: "tracer", Model: m}, "go", RunConfig{Sandbox: SandboxConfig{Client: newClient(t)}, Trace: tw})
	if err != nil {
		t.Fatal(err)
	}
	evs := readTrace(t, &buf)
	var types []string
	for i, e := range evs {
		types = append(types, string(e.Type))
		if e.Seq != int64(i+1) || e.TraceID != res.TraceID || e.RunID != res.RunID {
			t.Errorf("event %d has seq %d trace %s run %s", i, e.Seq, e.TraceID, e.RunID)
		}
	}
	want := "run_start model_request model_response tool_call sandbox_exec tool_result model_request model_response final_output run_end"
	if got := strings.Join(types, " "); got != want {
		t.Fatalf("trace types\n got %s\nwant %s", got, want)
	}
	exec := evs[4]
	if exec.Cmd != "echo checked; exit 7" || exec.ExitCode == nil || *exec.ExitCode != 7 {
		t.Errorf("sandbox_exec event %+v", exec)
	}
	if c := evs[3]; c.Arguments != `{"cmd":"echo checked; exit 7"}` || c.CallID == "" {
		t.Errorf("tool_call does not hold the model's input: %+v", c)
	}
	if r := evs[5]; !strings.Contains(r.Output, "exit code: 7") || !strings.Contains(r.Output, "checked") || r.Bytes != len(r.Output) {
		t.Errorf("tool_result does not hold what the model read: %+v", r)
	}
	req := evs[1]
	if req.Instructions == "" || len(req.InstructionsSHA256) != 64 || req.Settings == nil || req.Settings.Store == nil || *req.Settings.Store {
		t.Errorf("first model_request lacks the instructions, their hash or the settings (store=false): %+v", req)
	}
	if later := evs[6]; later.Instructions != "" || later.InstructionsSHA256 != req.InstructionsSHA256 {
		t.Errorf("unchanged instructions are recorded again, or their hash differs: %+v", later)
	}
	if evs[len(evs)-1].Turns != 2 || evs[len(evs)-2].Output != "all done" {
		t.Errorf("run_end/final_output wrong: %+v %+v", evs[len(evs)-1], evs[len(evs)-2])
	}
}

func TestPTYSessionsCanBeDriven(t *testing.T) {
	sess := liveSession(t)
	sh := &Shell{}
	tools := sh.Tools(sess)
	defer sh.CloseSession(context.Background(), sess)
	ctx := context.Background()
	out, err := tools[0].Call(ctx, []byte(`{"cmd": "read line; echo got:$line", "tty": true, "yield_time_ms": 300}`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "session_id: 1") {
		t.Fatalf("exec_command of an interactive program: %q", out)
	}
	out, err = tools[1].Call(ctx, []byte(`{"session_id": 1, "chars": "hello\n", "yield_time_ms": 3000}`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "got:hello") || !strings.Contains(out, "exit code: 0") {
		t.Fatalf("write_stdin: %q", out)
	}
	if _, err := tools[1].Call(ctx, []byte(`{"session_id": 1}`)); err == nil || !strings.Contains(err.Error(), "no running session 1") {
		t.Fatalf("write_stdin to an ended session: %v", err)
	}
}

func TestBackgroundProcessesAreKilledWhenTheRunEnds(t *testing.T) {
	sess := liveSession(t)
	sh := &Shell{}
	tools := sh.Tools(sess)
	start := time.Now()
	out, err := tools[0].Call(context.Background(), []byte(`{"cmd": "sleep 30", "yield_time_ms": 100}`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "still running") {
		t.Fatalf("long command did not yield a session: %q", out)
	}
	p := sh.table(sess).get(1)
	if err := sh.CloseSession(context.Background(), sess); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		t.Fatal("background process still running after CloseSession")
	}
	if time.Since(start) > 10*time.Second {
		t.Fatal("CloseSession waited for the process instead of killing it")
	}
}

func TestCommandTimeoutKills(t *testing.T) {
	sess := liveSession(t)
	sh := &Shell{}
	tools := sh.Tools(sess)
	defer sh.CloseSession(context.Background(), sess)
	out, err := tools[0].Call(context.Background(), []byte(`{"cmd": "sleep 20", "timeout_ms": 200}`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "timed out") {
		t.Fatalf("timeout not reported: %q", out)
	}
}

func TestRunnerUsesTheConfiguredWorkdir(t *testing.T) {
	m := plan("done",
		call("write_file", map[string]any{"path": "note.txt", "content": "hi\n"}),
		call("exec_command", map[string]any{"cmd": "pwd; cat note.txt"}),
		call("apply_patch", map[string]any{"input": "*** Begin Patch\n*** Delete File: note.txt\n*** End Patch"}),
	)
	c := newClient(t)
	ws := t.TempDir()
	if _, err := (&Runner{}).Run(context.Background(), &SandboxAgent{Model: m}, "go", RunConfig{
		Sandbox: SandboxConfig{Client: c, Spec: sandbox.Spec{Workspace: ws}}, Workdir: "sub/dir",
	}); err != nil {
		t.Fatal(err)
	}
	outs := outputs(m.requests()[3])
	if !strings.Contains(outs[1], "sub/dir\nhi") {
		t.Errorf("command did not run in the workdir: %q", outs[1])
	}
	if !strings.Contains(outs[2], "D note.txt") {
		t.Errorf("delete in the workdir: %q", outs[2])
	}
	if !strings.Contains(m.requests()[0].Instructions, "/workspace/sub/dir") {
		t.Error("the prompt does not name the working directory")
	}
}

func TestCancellingDuringACommandKillsItAndCleansUp(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := newClient(t)
	m := plan("never", call("exec_command", map[string]any{"cmd": "sleep 30"}))
	time.AfterFunc(300*time.Millisecond, cancel)
	start := time.Now()
	_, err := (&Runner{}).Run(ctx, &SandboxAgent{Model: m}, "go", RunConfig{Sandbox: SandboxConfig{Client: c}})
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "during exec_command") {
		t.Fatalf("error %v, want a cancellation during exec_command", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("run took %s after cancel", d)
	}
	if c.only(t).closed() != 1 {
		t.Fatal("session not closed after cancel")
	}
}
