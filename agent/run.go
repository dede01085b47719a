package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/agentbox/agentbox/agent/model"
	"github.com/agentbox/agentbox/internal/truncate"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/trace"
)

// cleanupTimeout bounds persisting and closing after the run's context
// has ended.
const cleanupTimeout = 2 * time.Minute

// Run runs agent on input until it gives a final answer, fails, or reaches
// its turn limit (ErrMaxTurns). Whatever happens, including cancellation
// of ctx, the runner persists the workspace when asked, closes the session
// if it created or resumed it (never an injected one), and returns the
// Result so far with the error.
func (r *Runner) Run(ctx context.Context, a *SandboxAgent, input string, cfg RunConfig) (res *Result, err error) {
	start := time.Now()
	tw := cfg.Trace
	res = &Result{RunID: tw.RunID(), TraceID: tw.TraceID()}
	if a == nil || a.Model == nil {
		return res, sandbox.Errorf(sandbox.ErrInvalid, "agent: run needs an agent with a model")
	}
	if rs := cfg.Resume; rs != nil {
		switch {
		case rs.Done:
			return res, sandbox.Errorf(sandbox.ErrInvalid, "agent: the run saved in this state already gave its final answer; start a new run")
		case input != "" && input != rs.Task:
			return res, sandbox.Errorf(sandbox.ErrInvalid, "agent: resuming a run on task %q, not %q: give no task, or the same one", rs.Task, input)
		case rs.Agent != a.Name:
			return res, sandbox.Errorf(sandbox.ErrInvalid, "agent: the saved run is agent %q's, not %q's", rs.Agent, a.Name)
		}
		input = rs.Task
		if cfg.Sandbox.Session == nil && cfg.Sandbox.State == nil {
			st := rs.Session
			cfg.Sandbox.State = &st
		}
	}
	// The credentials the egress proxy injects never enter the sandbox;
	// they must not reach the trace either (a command may echo a header).
	tw.Redactor().AddSecret(credentialValues(cfg.Sandbox.Spec.Policy)...)
	emit := func(e trace.Event) { _ = tw.Emit(e) }
	progress := func(e Event) {
		if cfg.OnEvent != nil {
			cfg.OnEvent(e)
		}
	}
	emit(trace.Event{Type: trace.RunStart, Agent: a.Name, Model: a.Model.Name(), Input: input})

	defer func() {
		res.Duration = time.Since(start)
		if err != nil {
			emit(trace.Event{Type: trace.Error, Turn: res.Turns, Err: err.Error()})
			progress(Event{Type: EventError, Turn: res.Turns, Err: err.Error()})
		}
		u := res.Usage
		emit(trace.Event{Type: trace.RunEnd, Turns: res.Turns, Usage: &u, DurationMS: res.Duration.Milliseconds()})
	}()

	o, err := openSession(ctx, a, cfg)
	if err != nil {
		return res, err
	}
	// began are the IDs of the calls that have begun running: a state
	// saved while one runs says so, and a run resumed from it does not
	// run that call a second time.
	began := map[string]bool{}
	// checkpoint hands the run's state to the caller, who saves it to
	// continue the run in a new process; sess is nil once it is closed.
	checkpoint := func(sess sandbox.Session, done bool) {
		if cfg.Checkpoint != nil {
			cfg.Checkpoint(runState(a, input, res, began, sess, done))
		}
	}
	sess := o.sess
	res.Inputs = o.inputs
	tw.Redactor().AddSecret(credentialValues(sess.State().Spec.Policy)...)
	progress(Event{Type: EventSession, Text: o.how})

	caps := a.Capabilities
	if caps == nil {
		caps = DefaultCapabilities()
	}
	workdir := cfg.Workdir
	root := sess.State().Spec.Workdir
	if root == "" {
		root = sandbox.DefaultWorkdir
	}
	toolSess := sess
	if workdir != "" && path.Clean(workdir) != root {
		if !path.IsAbs(workdir) {
			workdir = path.Join(root, workdir)
		}
		toolSess = workdirSession{Session: sess, dir: path.Clean(workdir)}
	} else {
		workdir = root
	}
	toolErr := startCapabilities(ctx, caps)
	var tools []Tool
	if toolErr == nil {
		tools, toolErr = bindTools(caps, toolSess)
	}

	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		err = errors.Join(err, r.finish(cctx, o, caps, cfg, res, err == nil))
		checkpoint(nil, res.FinalOutput != "" && err == nil)
	}()
	if toolErr != nil {
		return res, toolErr
	}

	tree, terr := RenderTree(ctx, sess, root, TreeOptions{})
	if terr != nil {
		tree = "(could not list the workspace: " + terr.Error() + ")"
	}
	instructions := BuildInstructions(a, caps, workdir, tree, sess.State().Spec.Policy)

	maxTurns := a.MaxTurns
	if cfg.MaxTurns > 0 {
		maxTurns = cfg.MaxTurns
	}
	if maxTurns <= 0 {
		maxTurns = DefaultMaxTurns
	}
	specs := make([]model.Tool, len(tools))
	names := make([]string, len(tools))
	for i, t := range tools {
		specs[i], names[i] = t.Spec, t.Spec.Name
	}
	var filters []InputFilter
	for _, c := range caps {
		if f, ok := c.(InputFilter); ok {
			filters = append(filters, f)
		}
	}

	res.Items = []model.Item{{Type: model.ItemMessage, Role: model.RoleUser, Text: input}}
	first := 1
	// runCalls runs a turn's calls in order, each output joining the
	// conversation (and the checkpoint) as it comes.
	runCalls := func(turn int, calls []model.Item) error {
		for _, c := range calls {
			// The checkpoint that marks the call begun is handed over
			// before the tool runs, so a run killed during the call
			// leaves a state that says so. A run cancelled by then (a
			// caller that could not save the mark cancels it) does not
			// run the call, which stays not begun.
			begin := func() error {
				if err := ctx.Err(); err != nil {
					return err
				}
				began[c.CallID] = true
				checkpoint(sess, false)
				if err := ctx.Err(); err != nil {
					delete(began, c.CallID)
					return err
				}
				return nil
			}
			out, err := r.callTool(ctx, turn, c, tools, cfg, emit, progress, begin)
			if err != nil {
				return err
			}
			res.Items = append(res.Items, model.Item{Type: model.ItemFunctionCallOutput, CallID: c.CallID, Output: out})
			checkpoint(sess, false)
		}
		return nil
	}
	if rs := cfg.Resume; rs != nil {
		res.Items, res.Turns, res.Usage = slices.Clone(rs.Items), rs.Turns, rs.Usage
		first = rs.Turns + 1
		for _, c := range rs.Started {
			began[c.CallID] = true
		}
		// The calls the interrupted run had not answered come first, in
		// the turn that asked for them: one that had begun is answered
		// as interrupted, not run again; one that had not runs now
		// (approval is asked again).
		for _, c := range pendingCalls(res.Items) {
			if began[c.CallID] {
				res.Items = append(res.Items, interrupted(rs.Turns, c, emit, progress))
				checkpoint(sess, false)
				continue
			}
			if err := runCalls(rs.Turns, []model.Item{c}); err != nil {
				return res, err
			}
		}
	}
	sent := "" // the instructions the trace holds whole
	for turn := first; ; turn++ {
		if turn > maxTurns {
			return res, fmt.Errorf("%w (limit %d)", ErrMaxTurns, maxTurns)
		}
		if err := ctx.Err(); err != nil {
			return res, fmt.Errorf("agent: run cancelled before turn %d: %w", turn, err)
		}
		res.Turns = turn
		input := slices.Clone(res.Items)
		for _, f := range filters {
			input = f.FilterInput(input)
		}
		req := model.Request{Instructions: instructions, Input: input, Tools: specs, Settings: a.Settings}
		emit(requestEvent(turn, req, names, &sent))
		progress(Event{Type: EventTurn, Turn: turn})
		t0 := time.Now()
		resp, err := respond(ctx, a.Model, req, cfg.OnEvent != nil, func(delta string) {
			progress(Event{Type: EventTextDelta, Turn: turn, Text: delta})
		})
		if err != nil {
			return res, fmt.Errorf("agent: turn %d: model %s: %w", turn, a.Model.Name(), err)
		}
		res.Usage.Add(resp.Usage)
		if resp.Model != "" && !slices.Contains(res.Models, resp.Model) {
			res.Models = append(res.Models, resp.Model)
		}
		calls := resp.Calls()
		callNames := make([]string, len(calls))
		for i, c := range calls {
			callNames[i] = c.Name
		}
		u := resp.Usage
		emit(trace.Event{Type: trace.ModelResponse, Turn: turn, ResponseID: resp.ID, Model: resp.Model, Text: resp.Text(), Calls: callNames, Usage: &u, DurationMS: time.Since(t0).Milliseconds()})
		for i := range resp.Output {
			if resp.Output[i].Type == model.ItemFunctionCall && resp.Output[i].CallID == "" {
				resp.Output[i].CallID = fmt.Sprintf("call_%d_%d", turn, i)
			}
		}
		res.Items = append(res.Items, resp.Output...)
		checkpoint(sess, false)
		if len(calls) == 0 {
			res.FinalOutput = resp.Text()
			emit(trace.Event{Type: trace.FinalOutput, Turn: turn, Output: res.FinalOutput})
			progress(Event{Type: EventFinal, Turn: turn, Text: res.FinalOutput})
			return res, nil
		}
		if err := runCalls(turn, resp.Calls()); err != nil {
			return res, err
		}
	}
}

// respond runs one model turn, over the provider's streaming path when it
// has one and someone watches the run (live), so that text arrives as it
// is written; the response is the same either way.
func respond(ctx context.Context, m model.Model, req model.Request, live bool, onText func(string)) (*model.Response, error) {
	s, ok := m.(model.Streamer)
	if !ok || !live {
		return m.Respond(ctx, req)
	}
	return s.RespondStream(ctx, req, func(e model.Event) {
		if e.Type == "text_delta" && e.Delta != "" {
			onText(e.Delta)
		}
	})
}

// callTool runs one call and returns its output for the model. Only a
// cancelled context or a failing approver end the run; every other
// failure becomes an output the model can read and recover from.
//
// begin is called once the call is about to run (approved, if it needed
// it), before the tool can change anything; its error (the run was
// cancelled) ends the run with the call not run.
func (r *Runner) callTool(ctx context.Context, turn int, c model.Item, tools []Tool, cfg RunConfig, emit func(trace.Event), progress func(Event), begin func() error) (string, error) {
	start := time.Now()
	summary := displaySummary(c.Name, c.Arguments)
	emit(trace.Event{Type: trace.ToolCall, Turn: turn, Tool: c.Name, CallID: c.CallID, Arguments: c.Arguments})
	progress(Event{Type: EventToolCall, Turn: turn, Tool: c.Name, Summary: shortSummary(summary)})

	var last *ExecReport
	denied := false
	finish := func(out string, toolErr error, max int) (string, error) {
		if toolErr != nil {
			out = "error: " + toolErr.Error()
		}
		out, cut := Truncate(out, max)
		e := trace.Event{Type: trace.ToolResult, Turn: turn, Tool: c.Name, CallID: c.CallID, Output: out, Bytes: len(out), Truncated: cut, DurationMS: time.Since(start).Milliseconds()}
		ev := Event{Type: EventToolResult, Turn: turn, Tool: c.Name, Summary: shortSummary(summary), Duration: time.Since(start), Denied: denied}
		if toolErr != nil {
			e.Err, ev.Err = toolErr.Error(), toolErr.Error()
		}
		if last != nil {
			e.ExitCode, ev.ExitCode, ev.TimedOut = last.ExitCode, last.ExitCode, last.TimedOut
		}
		emit(e)
		progress(ev)
		return out, nil
	}

	var tool *Tool
	for i := range tools {
		if tools[i].Spec.Name == c.Name {
			tool = &tools[i]
		}
	}
	if tool == nil {
		names := make([]string, len(tools))
		for i, t := range tools {
			names[i] = t.Spec.Name
		}
		return finish("", fmt.Errorf("unknown tool %q; the available tools are: %s", c.Name, strings.Join(names, ", ")), 0)
	}
	args := strings.TrimSpace(c.Arguments)
	if args == "" {
		args = "{}"
	}
	if !json.Valid([]byte(args)) {
		return finish("", fmt.Errorf("the arguments of %s are not valid JSON (%s); send one JSON object matching the tool's parameters", c.Name, clipText(args, 200)), tool.MaxOutput)
	}
	if rule, subject, ok := matchApproval(cfg.Approvals, c.Name, args); ok {
		call := Call{Tool: c.Name, CallID: c.CallID, Arguments: args, Subject: subject, Rule: rule.String()}
		approved, reason := false, "no approver is configured, so calls that need approval are denied"
		if cfg.Approver != nil {
			var err error
			approved, err = cfg.Approver.Approve(ctx, call)
			if err != nil {
				// ErrApprovalPending too: the call stays unanswered in the
				// run's state, and a resumed run asks again.
				return "", fmt.Errorf("agent: approval of %s %s: %w", c.Name, shortSummary(subject), err)
			}
			reason = "denied by the user"
		}
		emit(trace.Event{Type: trace.Approval, Turn: turn, Tool: c.Name, CallID: c.CallID, Approved: &approved, Rule: call.Rule})
		progress(Event{Type: EventApproval, Turn: turn, Tool: c.Name, Summary: shortSummary(subject), Approved: approved})
		if !approved {
			denied = true
			return finish(fmt.Sprintf("This call was not run: %s (rule %s). Do not retry it; choose another way or explain in your answer.", reason, call.Rule), nil, 0)
		}
	}
	tctx := withReporter(ctx, func(rep ExecReport) {
		last = &rep
		emit(trace.Event{Type: trace.SandboxExec, Turn: turn, Tool: c.Name, CallID: c.CallID, Cmd: rep.Cmd, ExitCode: rep.ExitCode, TimedOut: rep.TimedOut, Running: rep.Running, Violations: rep.Violations, DurationMS: rep.Duration.Milliseconds()})
	})
	// A run cancelled before the tool runs (during the approval, say)
	// leaves the call not begun: the resumed run runs it, rather than
	// answering as interrupted a call that never ran.
	if cerr := begin(); cerr != nil {
		return "", fmt.Errorf("agent: run cancelled before %s ran: %w", c.Name, cerr)
	}
	out, err := callSafely(tctx, tool, json.RawMessage(args))
	if cerr := ctx.Err(); cerr != nil {
		_, _ = finish(out, err, tool.MaxOutput)
		return "", fmt.Errorf("agent: run cancelled during %s: %w", c.Name, cerr)
	}
	return finish(out, err, tool.MaxOutput)
}

// interrupted answers call c of a resumed run, which had begun when the
// run stopped, without running it again; the trace records it as a
// result marked interrupted.
func interrupted(turn int, c model.Item, emit func(trace.Event), progress func(Event)) model.Item {
	summary := shortSummary(displaySummary(c.Name, c.Arguments))
	emit(trace.Event{Type: trace.ToolCall, Turn: turn, Tool: c.Name, CallID: c.CallID, Arguments: c.Arguments})
	emit(trace.Event{Type: trace.ToolResult, Turn: turn, Tool: c.Name, CallID: c.CallID, Output: interruptedOutput, Bytes: len(interruptedOutput), Interrupted: true})
	progress(Event{Type: EventToolResult, Turn: turn, Tool: c.Name, Summary: summary, Interrupted: true})
	return model.Item{Type: model.ItemFunctionCallOutput, CallID: c.CallID, Output: interruptedOutput}
}

// callSafely runs a tool, turning a panic into an error so that one
// faulty tool cannot take down the run without cleanup.
func callSafely(ctx context.Context, t *Tool, args json.RawMessage) (out string, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("tool %s panicked: %v", t.Spec.Name, p)
		}
	}()
	return t.Call(ctx, args)
}

// finish persists and releases what the run holds; ok says the run
// succeeded (BeforeClose only runs then). Background processes end first,
// so nothing changes the workspace while it is promoted or snapshotted.
func (r *Runner) finish(ctx context.Context, o *openedSession, caps []Capability, cfg RunConfig, res *Result, ok bool) error {
	var errs []error
	for _, c := range caps {
		if cl, isCloser := c.(SessionCloser); isCloser {
			if err := cl.CloseSession(ctx, o.sess); err != nil {
				errs = append(errs, fmt.Errorf("agent: close capability %s: %w", c.Name(), err))
			}
		}
	}
	if ok && cfg.BeforeClose != nil {
		if err := cfg.BeforeClose(ctx, o.sess, res); err != nil {
			errs = append(errs, err)
		}
	}
	if cfg.Sandbox.SaveSnapshot {
		ref, err := o.sess.Snapshot(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("agent: snapshot workspace of session %s: %w", o.sess.ID(), err))
		}
		res.Snapshot = ref
	}
	res.State = o.sess.State()
	if o.owned {
		if err := o.sess.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("agent: close session %s: %w", o.sess.ID(), err))
		}
	}
	o.removeTemp()
	return errors.Join(errs...)
}

// startCapabilities starts the capabilities that set up before their
// tools are listed (MCP servers connect); the first failure ends the run.
func startCapabilities(ctx context.Context, caps []Capability) error {
	for _, c := range caps {
		if st, ok := c.(Starter); ok {
			if err := st.Start(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// bindTools collects every capability's tools, refusing duplicate names.
func bindTools(caps []Capability, sess sandbox.Session) ([]Tool, error) {
	var tools []Tool
	seen := map[string]string{}
	for _, c := range caps {
		for _, t := range c.Tools(sess) {
			if prev, dup := seen[t.Spec.Name]; dup {
				return nil, sandbox.Errorf(sandbox.ErrInvalid, "agent: tool %q is declared by both %s and %s", t.Spec.Name, prev, c.Name())
			}
			seen[t.Spec.Name] = c.Name()
			tools = append(tools, t)
		}
	}
	return tools, nil
}

// requestEvent summarizes a model request for the trace: its size, tools
// and settings, the instructions' hash, and the instructions themselves
// when the trace does not hold them yet (*sent is the last recorded).
func requestEvent(turn int, req model.Request, tools []string, sent *string) trace.Event {
	sum := sha256.Sum256([]byte(req.Instructions))
	settings := req.Settings
	store := settings.Stores()
	settings.Store = &store
	e := trace.Event{Type: trace.ModelRequest, Turn: turn, Items: len(req.Input), Tools: tools,
		InstructionBytes: len(req.Instructions), InstructionsSHA256: hex.EncodeToString(sum[:]), Settings: &settings}
	if req.Instructions != *sent {
		e.Instructions, *sent = req.Instructions, req.Instructions
	}
	return e
}

// credentialValues are the secrets a policy hands the egress proxy.
func credentialValues(p sandbox.Policy) []string {
	var vals []string
	for _, headers := range p.Network.Credentials {
		for _, v := range headers {
			vals = append(vals, v)
		}
	}
	return vals
}

func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:truncate.RuneStart(s, n)] + "…"
}

// shortSummary is a one-line form of a call's subject for progress lines.
func shortSummary(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return clipText(s, 60)
}
