package trace

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"strings"
	"time"
)

//go:embed html.tmpl
var htmlSource string

var htmlTemplate = template.Must(template.New("trace").Parse(htmlSource))

// RenderHTML writes a run's trace as one self-contained HTML page for a
// reviewer: the run's facts, counts, a timeline of turns with each tool
// call (its command, exit code, duration bar, policy violations, input and
// output), the promoted files with their hashes, and errors. The page
// loads nothing (its Content-Security-Policy forbids it) and runs no
// script; every value from the trace is escaped.
func RenderHTML(w io.Writer, evs []Event) error {
	if err := htmlTemplate.Execute(w, buildPage(evs)); err != nil {
		return fmt.Errorf("trace: render HTML: %w", err)
	}
	return nil
}

type htmlPage struct {
	RunID, TraceID, Agent, Model, Task string
	Started, Duration, Tokens          string
	Outcome                            string
	Failed                             bool
	Final                              string
	Stats                              []htmlStat
	Turns                              []*htmlTurn
	Promotions                         []htmlPromotion
	Errors                             []string
}

type htmlStat struct {
	Label string
	Value int
	Alarm bool
}

type htmlTurn struct {
	N                  int
	Offset, Duration   string
	Request, Response  string
	Instructions       string
	InstructionsSHA256 string
	Text               string
	Steps              []*htmlStep
}

type htmlStep struct {
	Tool, CallID, Summary string
	Offset, Duration      string
	Exit                  string
	Failed, Denied        bool
	Approval              string
	Violations            []string
	Input, Output         string
	// Left and Width place the step's bar on the run's time axis, in
	// percent.
	Left, Width float64
}

type htmlPromotion struct {
	Dest     string
	Files    []PromotedFile
	Rejected []string
	Err      string
}

// buildPage folds the events into the page: tool call, sandbox exec,
// approval and result events of one call id become one step.
func buildPage(evs []Event) *htmlPage {
	p := &htmlPage{Outcome: "no end recorded (the run was interrupted or is still going)"}
	if len(evs) == 0 {
		return p
	}
	t0 := evs[0].Time
	total := evs[len(evs)-1].Time.Sub(t0)
	p.RunID, p.TraceID, p.Started = evs[0].RunID, evs[0].TraceID, t0.Format(time.RFC3339)
	pct := func(d time.Duration) float64 {
		if total <= 0 {
			return 0
		}
		return float64(d) / float64(total) * 100
	}
	rel := func(t time.Time) string { return fmtRel(t.Sub(t0)) }
	var turn *htmlTurn
	steps := map[string]*htmlStep{}
	var commands, failed, violations, approvals, promoted int
	for _, e := range evs {
		if e.Turn > 0 && (turn == nil || turn.N != e.Turn) {
			turn = &htmlTurn{N: e.Turn, Offset: rel(e.Time)}
			p.Turns = append(p.Turns, turn)
		}
		switch e.Type {
		case RunStart:
			p.Agent, p.Model, p.Task = e.Agent, e.Model, e.Input
		case ModelRequest:
			turn.Request = strings.TrimSpace(describe(e))
			turn.Instructions, turn.InstructionsSHA256 = e.Instructions, e.InstructionsSHA256
		case ModelResponse:
			turn.Response = strings.TrimSpace(describe(e))
			turn.Duration = msString(e.DurationMS)
			turn.Text = e.Text
		case ToolCall:
			s := &htmlStep{Tool: e.Tool, CallID: e.CallID, Offset: rel(e.Time), Input: e.Arguments, Left: pct(e.Time.Sub(t0))}
			s.Summary = quoteShort(e.Arguments, 120)
			steps[e.CallID] = s
			turn.Steps = append(turn.Steps, s)
		case SandboxExec:
			commands++
			s := steps[e.CallID]
			if s == nil {
				continue
			}
			s.Summary = e.Cmd
			if e.ExitCode != nil {
				s.Exit = fmt.Sprintf("exit %d", *e.ExitCode)
				s.Failed = s.Failed || *e.ExitCode != 0
			}
			if e.Running {
				s.Exit = "still running"
			}
			if e.TimedOut {
				s.Exit += ", timed out"
				s.Failed = true
			}
			if e.ExitCode != nil && *e.ExitCode != 0 || e.TimedOut {
				failed++
			}
			s.Violations = append(s.Violations, e.Violations...)
			violations += len(e.Violations)
		case Approval:
			approvals++
			if s := steps[e.CallID]; s != nil {
				s.Approval = "approved (rule " + e.Rule + ")"
				if e.Approved == nil || !*e.Approved {
					s.Approval, s.Denied = "denied (rule "+e.Rule+")", true
				}
			}
		case ToolResult:
			s := steps[e.CallID]
			if s == nil {
				continue
			}
			s.Output, s.Duration = e.Output, msString(e.DurationMS)
			s.Width = max(pct(time.Duration(e.DurationMS)*time.Millisecond), 0.4)
			if e.Err != "" {
				s.Failed = true
			}
			if e.Interrupted {
				s.Exit, s.Failed = "interrupted, not run again", true
			}
		case Promotion:
			promoted += len(e.Files)
			p.Promotions = append(p.Promotions, htmlPromotion{Dest: e.Dest, Files: e.Files, Rejected: e.Rejected, Err: e.Err})
		case FinalOutput:
			p.Final = e.Output
		case Error:
			p.Errors = append(p.Errors, e.Err)
		case RunEnd:
			p.Duration = msString(e.DurationMS)
			if e.Usage != nil {
				p.Tokens = fmt.Sprintf("%d in, %d out", e.Usage.InputTokens, e.Usage.OutputTokens)
			}
		}
	}
	p.Failed = len(p.Errors) > 0
	switch {
	case p.Failed:
		p.Outcome = "failed"
	case p.Final != "":
		p.Outcome = "answered"
	}
	p.Stats = []htmlStat{
		{Label: "turns", Value: len(p.Turns)},
		{Label: "commands", Value: commands},
		{Label: "failed commands", Value: failed, Alarm: failed > 0},
		{Label: "policy violations", Value: violations, Alarm: violations > 0},
		{Label: "approvals", Value: approvals},
		{Label: "promoted files", Value: promoted},
	}
	return p
}

func msString(ms int64) string {
	if ms <= 0 {
		return ""
	}
	return (time.Duration(ms) * time.Millisecond).String()
}
