package agent

import (
	"context"
	"errors"
	"time"

	"github.com/agentbox/agentbox/agent/model"
	"github.com/agentbox/agentbox/manifest"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/trace"
)

// ErrMaxTurns is returned (wrapped) when a run reaches its turn limit
// without a final answer.
var ErrMaxTurns = errors.New("agent: maximum turns reached without a final answer")

// SandboxConfig says where a run's work happens. The runner picks, in
// order: a live Session, else a saved State (Client.Resume), else a fresh
// session from Client (seeded from Snapshot when set).
type SandboxConfig struct {
	// Client creates or resumes sessions; the runner owns (and closes)
	// what it creates or resumes.
	Client sandbox.Client
	// Session is a live session the caller owns; the runner never stops
	// or closes it.
	Session sandbox.Session
	// State resumes a saved session through Client.
	State *sandbox.State
	// Snapshot seeds a fresh session's workspace.
	Snapshot string
	// Spec is the base spec of a fresh session: policy, workspace, env,
	// image. The manifest's mounts, env and user are merged into it.
	Spec sandbox.Spec
	// SaveSnapshot snapshots the workspace when the run ends (also on
	// error), into the client's snapshot store; the reference is in
	// Result.Snapshot.
	SaveSnapshot bool
	// ManifestBase is the trusted directory that the manifest's host
	// sources resolve under (usually the agent file's directory).
	ManifestBase string
	// TrustedManifest lets the manifest name host sources outside
	// ManifestBase (an operator's own agent file, not model or user input).
	TrustedManifest bool
}

// RunConfig configures one Runner.Run.
type RunConfig struct {
	Sandbox SandboxConfig
	// Manifest overrides the agent's manifest.
	Manifest *manifest.Manifest
	// Workdir is the sandbox directory commands start in; default the
	// spec's workdir.
	Workdir string
	// Trace records every step; nil records nothing.
	Trace *trace.Writer
	// Approver decides tool calls that match an approval rule; with rules
	// but no approver, matching calls are denied.
	Approver Approver
	// Approvals are the rules that require approval.
	Approvals []ApprovalRule
	// OnEvent receives live progress; it must not block for long.
	OnEvent func(Event)
	// MaxTurns overrides the agent's turn limit when positive.
	MaxTurns int
	// Resume continues the run a RunState saved: its conversation, turns
	// and tokens, its pending calls first (a call that had begun is not
	// run again but answered as interrupted), in its session (resumed, or
	// rebuilt when gone) unless Sandbox names another. The task given to
	// Run must be empty or the saved one.
	Resume *RunState
	// Checkpoint receives the run's state after each model answer, as
	// each call begins (before the tool runs), after each tool output and
	// at the end (with the session's final state), so a caller can save
	// it and resume the run in a new process. It must not block for long;
	// a caller that must not lose a call's start saves the state before
	// returning, and one that could not save it cancels the run's
	// context before returning: the call is then not run (nor marked
	// begun).
	Checkpoint func(*RunState)
	// BeforeClose runs when the run succeeded, while the session is still
	// live (its background processes already ended) and before the runner
	// snapshots and closes it: artifact promotion goes here. Its error
	// fails the run.
	BeforeClose func(ctx context.Context, sess sandbox.Session, res *Result) error
}

// Result is what a run produced.
type Result struct {
	// FinalOutput is the model's final answer.
	FinalOutput string `json:"final_output"`
	// Items is the whole conversation: the user input, every model output
	// item and every tool output.
	Items []model.Item `json:"items"`
	// Usage sums the tokens of every turn.
	Usage model.Usage `json:"usage"`
	// State describes the session, to resume it.
	State sandbox.State `json:"state"`
	// Snapshot is the workspace snapshot saved at the end, if any.
	Snapshot string `json:"snapshot,omitempty"`
	// Turns is the number of model turns taken.
	Turns int `json:"turns"`
	// TraceID identifies the run's trace (and OTLP trace).
	TraceID string `json:"trace_id,omitempty"`
	// RunID identifies the run.
	RunID string `json:"run_id,omitempty"`
	// Duration is the run's wall time.
	Duration time.Duration `json:"duration"`
	// Inputs are the hashes of what the manifest put in the session
	// (empty for a session resumed or injected, which the runner did not
	// fill).
	Inputs []manifest.Input `json:"inputs,omitempty"`
	// Models are the models the provider said answered, in first-answer
	// order.
	Models []string `json:"models,omitempty"`
}

// Runner runs agents. The zero Runner is ready to use.
type Runner struct{}
