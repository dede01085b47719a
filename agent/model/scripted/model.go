package scripted

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/agentbox/agentbox/agent/model"
)

// Model plays a Plan. It keeps no state between turns: the step to play
// is found from the call ids it issued earlier in the conversation, so one
// Model can serve several runs and a resumed conversation continues where
// it stopped.
type Model struct {
	plan *Plan
}

var _ model.Model = (*Model)(nil)

// New returns a Model that plays plan.
func New(plan Plan) *Model { return &Model{plan: &plan} }

// Load reads the plan file at path and returns a Model playing it.
func Load(path string) (*Model, error) {
	p, err := LoadPlan(path)
	if err != nil {
		return nil, err
	}
	return New(*p), nil
}

// Parse parses a plan and returns a Model playing it.
func Parse(data []byte) (*Model, error) {
	p, err := ParsePlan(data)
	if err != nil {
		return nil, err
	}
	return New(*p), nil
}

// Plan returns the plan being played.
func (m *Model) Plan() Plan { return *m.plan }

// Name is "scripted:" and the plan's file name.
func (m *Model) Name() string { return "scripted:" + filepath.Base(m.plan.Source) }

// StepError says which step of which plan did not hold.
type StepError struct {
	Plan string
	// Step is 1-based; Line is its line in the plan file.
	Step, Line int
	Err        error
}

func (e *StepError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("scripted plan %s: step %d (line %d): %v", e.Plan, e.Step, e.Line, e.Err)
	}
	return fmt.Sprintf("scripted plan %s: step %d: %v", e.Plan, e.Step, e.Err)
}

func (e *StepError) Unwrap() error { return e.Err }

// callPrefix marks call ids this model issued: call_s<step>_<n>.
const callPrefix = "call_s"

func callID(step, n int) string { return fmt.Sprintf("%s%d_%d", callPrefix, step, n) }

var callIDRE = regexp.MustCompile(`^call_s(\d+)_(\d+)$`)

// Respond checks the previous step's expectations against the tool
// outputs in req.Input, then plays the next step.
func (m *Model) Respond(ctx context.Context, req model.Request) (*model.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	last := 0 // 1-based number of the last step played, 0 for none
	outputs := map[string]string{}
	for _, it := range req.Input {
		switch it.Type {
		case model.ItemFunctionCall:
			if sm := callIDRE.FindStringSubmatch(it.CallID); sm != nil {
				n, _ := strconv.Atoi(sm[1])
				last = max(last, n)
			}
		case model.ItemFunctionCallOutput:
			outputs[it.CallID] = it.Output
		}
	}
	if last > 0 {
		if last > len(m.plan.Steps) {
			return nil, fmt.Errorf("scripted plan %s: the conversation has calls of step %d but the plan has %d steps", m.plan.Source, last, len(m.plan.Steps))
		}
		if err := m.check(last, outputs); err != nil {
			return nil, err
		}
	}
	if last >= len(m.plan.Steps) {
		return nil, fmt.Errorf("scripted plan %s exhausted after step %d: the plan has no final answer for the model to give", m.plan.Source, last)
	}
	num := last + 1
	st := m.plan.Steps[num-1]
	resp := &model.Response{ID: fmt.Sprintf("scripted-%d", num), Model: m.Name()}
	if st.IsFinal {
		text := templateRE.ReplaceAllStringFunc(st.Final, func(s string) string {
			n, _ := strconv.Atoi(templateRE.FindStringSubmatch(s)[1])
			return m.stepOutput(n, outputs)
		})
		resp.Output = []model.Item{{Type: model.ItemMessage, Role: model.RoleAssistant, Text: text}}
	} else {
		for i, c := range st.Calls {
			resp.Output = append(resp.Output, model.Item{
				Type: model.ItemFunctionCall, CallID: callID(num, i+1), Name: c.Tool, Arguments: string(c.Arguments),
			})
		}
	}
	// No model ran, so no token was used: Usage stays zero rather than an
	// estimate that a trace or a run's total would show as real.
	return resp, nil
}

// stepOutput joins the outputs of step n's calls. When an output has the
// shell tools' header (exit code, wall time ... then a line "output:"),
// only what the command printed is used.
func (m *Model) stepOutput(n int, outputs map[string]string) string {
	var parts []string
	for i := range m.plan.Steps[n-1].Calls {
		out := outputs[callID(n, i+1)]
		if exitCodeRE.MatchString(out) {
			if _, body, ok := strings.Cut(out, "\noutput:\n"); ok {
				out = body
			}
		}
		parts = append(parts, strings.TrimRight(out, "\n"))
	}
	return strings.Join(parts, "\n\n")
}

var exitCodeRE = regexp.MustCompile(`(?m)^exit code: (-?\d+)$`)

// check verifies step n's expectations against its calls' outputs.
func (m *Model) check(n int, outputs map[string]string) error {
	st := m.plan.Steps[n-1]
	stepErr := func(format string, args ...any) error {
		return &StepError{Plan: m.plan.Source, Step: n, Line: st.Line, Err: fmt.Errorf(format, args...)}
	}
	for i, c := range st.Calls {
		id := callID(n, i+1)
		out, ok := outputs[id]
		if !ok {
			return stepErr("no output came back for call %d (%s)", i+1, c.Tool)
		}
		e := st.Expect
		if e == nil {
			continue
		}
		for _, want := range e.OutputContains {
			if !strings.Contains(out, want) {
				return stepErr("expected the output of %s %s to contain %q, got:\n%s", c.Tool, c.Arguments, want, excerpt(out))
			}
		}
		for _, bad := range e.OutputNotContains {
			if strings.Contains(out, bad) {
				return stepErr("expected the output of %s %s not to contain %q, got:\n%s", c.Tool, c.Arguments, bad, excerpt(out))
			}
		}
		if e.ExitCode == nil && e.Failed == nil {
			continue
		}
		sm := exitCodeRE.FindStringSubmatch(out)
		if sm == nil {
			return stepErr("expected %s %s to report an exit code, got:\n%s", c.Tool, c.Arguments, excerpt(out))
		}
		code, _ := strconv.Atoi(sm[1])
		if e.ExitCode != nil && code != *e.ExitCode {
			return stepErr("expected %s %s to exit with %d, it exited with %d:\n%s", c.Tool, c.Arguments, *e.ExitCode, code, excerpt(out))
		}
		if e.Failed != nil && (code != 0) != *e.Failed {
			want := "fail"
			if !*e.Failed {
				want = "succeed"
			}
			return stepErr("expected %s %s to %s, it exited with %d:\n%s", c.Tool, c.Arguments, want, code, excerpt(out))
		}
	}
	return nil
}

// excerpt keeps error messages readable when a tool printed a lot.
func excerpt(s string) string {
	const max = 2000
	if len(s) <= max {
		return s
	}
	return s[:max] + fmt.Sprintf("\n[... %d more bytes]", len(s)-max)
}
