package trace

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// RenderTimeline writes a readable timeline of events: one line per step
// with the time since the run started, the turn, what happened and how
// long it took. Errors are marked with "!!" so they stand out.
func RenderTimeline(w io.Writer, evs []Event) error {
	if len(evs) == 0 {
		_, err := fmt.Fprintln(w, "(empty trace)")
		return err
	}
	t0 := evs[0].Time
	var b strings.Builder
	head := evs[0]
	fmt.Fprintf(&b, "run %s  trace %s  started %s\n", head.RunID, head.TraceID, t0.Format(time.RFC3339))
	for _, e := range evs {
		rel := e.Time.Sub(t0)
		mark := "  "
		if e.Type == Error || e.Err != "" {
			mark = "!!"
		}
		turn := "       "
		if e.Turn > 0 {
			turn = fmt.Sprintf("turn %-2d", e.Turn)
		}
		fmt.Fprintf(&b, "%s %9s  %s  %s\n", mark, fmtRel(rel), turn, describe(e))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func fmtRel(d time.Duration) string {
	return fmt.Sprintf("+%.3fs", d.Seconds())
}

func dur(ms int64) string {
	if ms <= 0 {
		return ""
	}
	return "  " + (time.Duration(ms) * time.Millisecond).String()
}

// describe is the one-line form of an event.
func describe(e Event) string {
	switch e.Type {
	case RunStart:
		s := fmt.Sprintf("run start  agent=%s  model=%s", orDash(e.Agent), orDash(e.Model))
		if e.Input != "" {
			s += "  task=" + quoteShort(e.Input, 80)
		}
		return s
	case ModelRequest:
		return fmt.Sprintf("model request  %d items, %d tools, %d bytes of instructions", e.Items, len(e.Tools), e.InstructionBytes)
	case ModelResponse:
		s := "model response"
		if len(e.Calls) > 0 {
			s += "  calls " + strings.Join(e.Calls, ", ")
		}
		if e.Text != "" {
			s += "  text " + quoteShort(e.Text, 60)
		}
		if e.Usage != nil {
			s += fmt.Sprintf("  tokens in %d out %d", e.Usage.InputTokens, e.Usage.OutputTokens)
		}
		return s + dur(e.DurationMS)
	case ToolCall:
		return fmt.Sprintf("%s  %s", e.Tool, quoteShort(e.Arguments, 80))
	case SandboxExec:
		s := "  exec " + quoteShort(e.Cmd, 70)
		switch {
		case e.Running:
			s += "  still running"
		case e.ExitCode != nil:
			s += fmt.Sprintf("  exit %d", *e.ExitCode)
		}
		if e.TimedOut {
			s += "  TIMED OUT"
		}
		return s + dur(e.DurationMS)
	case Approval:
		verdict := "denied"
		if e.Approved != nil && *e.Approved {
			verdict = "approved"
		}
		return fmt.Sprintf("  approval %s  %s (rule %s)", verdict, e.Tool, e.Rule)
	case ToolResult:
		s := fmt.Sprintf("  -> %s  %d bytes", e.Tool, e.Bytes)
		if e.Truncated {
			s += " (truncated)"
		}
		if e.ExitCode != nil {
			s += fmt.Sprintf("  exit %d", *e.ExitCode)
		}
		if e.Err != "" {
			s += "  ERROR " + quoteShort(e.Err, 100)
		}
		return s + dur(e.DurationMS)
	case Error:
		return "ERROR " + e.Err
	case FinalOutput:
		return "final output  " + quoteShort(e.Output, 100)
	case RunEnd:
		s := fmt.Sprintf("run end  %d turns", e.Turns)
		if e.Usage != nil {
			s += fmt.Sprintf("  tokens in %d out %d total %d", e.Usage.InputTokens, e.Usage.OutputTokens, e.Usage.TotalTokens)
		}
		return s + dur(e.DurationMS)
	}
	return string(e.Type)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// quoteShort is s on one line, cut to n runes.
func quoteShort(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) > n {
		s = string(r[:n]) + "…"
	}
	return s
}
