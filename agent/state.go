package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/agentbox/agentbox/agent/model"
	"github.com/agentbox/agentbox/sandbox"
)

// RunStateVersion is the version of the RunState format. Version 2 added
// Started; a version 1 state still loads (its unanswered calls are all
// Pending, as that format could not tell a call that had begun).
const RunStateVersion = 2

// ErrApprovalPending is what an Approver returns (wrapped or not) when a
// person must decide and is not there: the run stops with the call
// pending, its RunState saved, and a later run resumed from that state
// asks again before it runs the call.
var ErrApprovalPending = errors.New("agent: approval pending")

// RunState is what a new process needs to continue a run where it
// stopped (a crash, a Ctrl-C, an approval that waits for a person): the
// conversation so far, the turns and tokens spent, the calls still to
// run, and the session's state. RunConfig.Checkpoint receives it as the
// run goes; RunConfig.Resume continues from it.
type RunState struct {
	// Kind marks the format ("agentbox-run-state") so a file of it is
	// told apart from a bare session state.
	Kind    string `json:"kind"`
	Version int    `json:"version"`
	Agent   string `json:"agent"`
	// Task is the run's original input.
	Task  string       `json:"task"`
	Items []model.Item `json:"items"`
	Turns int          `json:"turns"`
	Usage model.Usage  `json:"usage"`
	// Pending are the calls of the last model answer that have no output
	// and had not begun: a resumed run runs them (asking approval again)
	// before the next model turn.
	Pending []model.Item `json:"pending,omitempty"`
	// Started are the calls that had begun running (approved, if they
	// needed it) and have no output: the run stopped during them. A
	// resumed run does not run them again, since their side effects may
	// have happened; each gets an output saying it was interrupted.
	Started []model.Item `json:"started,omitempty"`
	// Session is the session's state, to resume it (sandbox.Client.Resume,
	// else Rebuild from its workspace or snapshot).
	Session sandbox.State `json:"session"`
	// Done is set once the run gave its final answer; such a state is not
	// resumed.
	Done bool `json:"done,omitempty"`
	// RunID and TraceID are the interrupted run's, for the record.
	RunID   string `json:"run_id,omitempty"`
	TraceID string `json:"trace_id,omitempty"`
}

// RunStateKind is RunState.Kind.
const RunStateKind = "agentbox-run-state"

// UnmarshalRunState reads a RunState; ok is false (and err nil) when data
// is some other JSON document, such as a bare session state.
func UnmarshalRunState(data []byte) (st *RunState, ok bool, err error) {
	var probe struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, false, fmt.Errorf("agent: read run state: %w", err)
	}
	if probe.Kind != RunStateKind {
		return nil, false, nil
	}
	st = &RunState{}
	if err := json.Unmarshal(data, st); err != nil {
		return nil, true, fmt.Errorf("agent: read run state: %w", err)
	}
	if st.Version > RunStateVersion {
		return nil, true, fmt.Errorf("agent: run state version %d is newer than this agentbox reads (%d)", st.Version, RunStateVersion)
	}
	return st, true, nil
}

// pendingCalls are the function calls in items that no output answers.
func pendingCalls(items []model.Item) []model.Item {
	answered := map[string]bool{}
	for _, it := range items {
		if it.Type == model.ItemFunctionCallOutput {
			answered[it.CallID] = true
		}
	}
	var out []model.Item
	for _, it := range items {
		if it.Type == model.ItemFunctionCall && !answered[it.CallID] {
			out = append(out, it)
		}
	}
	return out
}

// runState snapshots res (and the session) as a RunState; began holds
// the call IDs of the calls that have begun running.
func runState(a *SandboxAgent, task string, res *Result, began map[string]bool, sess sandbox.Session, done bool) *RunState {
	st := &RunState{Kind: RunStateKind, Version: RunStateVersion, Agent: a.Name, Task: task,
		Items: slices.Clone(res.Items), Turns: res.Turns, Usage: res.Usage,
		Done: done, RunID: res.RunID, TraceID: res.TraceID}
	for _, c := range pendingCalls(res.Items) {
		if began[c.CallID] {
			st.Started = append(st.Started, c)
		} else {
			st.Pending = append(st.Pending, c)
		}
	}
	if sess != nil {
		st.Session = sess.State()
	} else {
		st.Session = res.State
	}
	return st
}

// interruptedOutput answers, in a resumed run, a call that had begun when
// the run stopped. It is not run again: a command half-way through, a
// push or a patch may have done some or all of its work, and running it
// twice would do that twice.
const interruptedOutput = "This call was interrupted: the run stopped while it was running, and the resumed run did not run it again. " +
	"Some or all of its effects may be in the workspace (files written, removed or half-written; commands it started). " +
	"Check what it changed before you retry it, and retry only what is missing."
