package trace

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// TimelineOptions tune RenderTimeline.
type TimelineOptions struct {
	// Full prints every line of tool inputs, outputs and instructions;
	// otherwise each block shows its first BlockLines lines.
	Full bool
	// BlockLines bounds a block when not Full (default 12).
	BlockLines int
}

// RenderTimeline writes a readable timeline of events: one line per step
// with the time since the run started, the turn, what happened and how
// long it took, and under tool calls and results their input and output,
// indented. Errors and policy violations are marked with "!!" at the start
// of the line so they stand out.
func RenderTimeline(w io.Writer, evs []Event, opts TimelineOptions) error {
	if len(evs) == 0 {
		_, err := fmt.Fprintln(w, "(empty trace)")
		return err
	}
	if opts.BlockLines <= 0 {
		opts.BlockLines = 12
	}
	t0 := evs[0].Time
	var b strings.Builder
	head := evs[0]
	fmt.Fprintf(&b, "run %s  trace %s  started %s\n", head.RunID, head.TraceID, t0.Format(time.RFC3339))
	for _, e := range evs {
		mark := "  "
		if e.Type == Error || e.Err != "" || len(e.Violations) > 0 || len(e.Rejected) > 0 {
			mark = "!!"
		}
		turn := "       "
		if e.Turn > 0 {
			turn = fmt.Sprintf("turn %-2d", e.Turn)
		}
		fmt.Fprintf(&b, "%s %9s  %s  %s\n", mark, fmtRel(e.Time.Sub(t0)), turn, describe(e))
		for _, d := range details(e) {
			writeBlock(&b, d, opts)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// block is a titled piece of text shown under an event's line.
type block struct {
	title string
	text  string
	alarm bool // a violation or refusal: marked with !!
}

// details are the blocks shown under an event: a tool's input (when the
// one-line summary cannot hold it) and output, violations, promoted files.
func details(e Event) []block {
	var bs []block
	switch e.Type {
	case ModelRequest:
		if e.Instructions != "" {
			bs = append(bs, block{title: "instructions", text: e.Instructions})
		}
	case ToolCall:
		if len([]rune(oneLine(e.Arguments))) > argsInline {
			for _, f := range argumentFields(e.Arguments) {
				bs = append(bs, block{title: f[0], text: f[1]})
			}
		}
	case ToolResult:
		if e.Output != "" {
			bs = append(bs, block{title: "output", text: e.Output})
		}
	case SandboxExec:
		for _, v := range e.Violations {
			bs = append(bs, block{title: "violation", text: v, alarm: true})
		}
	case Promotion:
		for _, f := range e.Files {
			bs = append(bs, block{title: "file", text: fmt.Sprintf("%s  %d bytes  sha256 %s", f.Path, f.Size, f.SHA256)})
		}
		for _, r := range e.Rejected {
			bs = append(bs, block{title: "rejected", text: r, alarm: true})
		}
	case FinalOutput:
		if strings.Contains(e.Output, "\n") || len(e.Output) > 100 {
			bs = append(bs, block{title: "answer", text: e.Output})
		}
	}
	return bs
}

// argsInline is how long a tool call's arguments may be to stay on its line.
const argsInline = 80

// argumentFields splits a call's JSON arguments into (key, value) pairs in
// key order, string values unquoted so that a patch or a script reads as
// text; arguments that are not a JSON object are one "arguments" field.
func argumentFields(args string) [][2]string {
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(args), &m) != nil {
		return [][2]string{{"arguments", args}}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	fields := make([][2]string, 0, len(keys))
	for _, k := range keys {
		v := string(m[k])
		var s string
		if json.Unmarshal(m[k], &s) == nil {
			v = s
		}
		fields = append(fields, [2]string{k, v})
	}
	return fields
}

// writeBlock writes a block indented under its event, cut to
// opts.BlockLines lines unless opts.Full.
func writeBlock(b *strings.Builder, bl block, opts TimelineOptions) {
	const indent = "                       "
	mark := "  "
	if bl.alarm {
		mark = "!!"
	}
	lines := strings.Split(strings.TrimRight(bl.text, "\n"), "\n")
	if len(lines) == 1 {
		fmt.Fprintf(b, "%s%s%s: %s\n", mark, indent, bl.title, lines[0])
		return
	}
	fmt.Fprintf(b, "%s%s%s:\n", mark, indent, bl.title)
	shown := lines
	if !opts.Full && len(lines) > opts.BlockLines {
		shown = lines[:opts.BlockLines]
	}
	for _, l := range shown {
		fmt.Fprintf(b, "  %s│ %s\n", indent, l)
	}
	if more := len(lines) - len(shown); more > 0 {
		fmt.Fprintf(b, "  %s│ … %d more lines (trace show --full)\n", indent, more)
	}
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
		s := fmt.Sprintf("model request  %d items, %d tools, %d bytes of instructions", e.Items, len(e.Tools), e.InstructionBytes)
		if e.InstructionsSHA256 != "" {
			s += " (sha256 " + short(e.InstructionsSHA256, 12) + ")"
		}
		if e.Settings != nil && e.Settings.Store != nil {
			s += fmt.Sprintf("  store=%t", *e.Settings.Store)
		}
		return s
	case ModelResponse:
		s := "model response"
		if e.ResponseID != "" {
			s += " " + e.ResponseID
		}
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
		args := oneLine(e.Arguments)
		if len([]rune(args)) > argsInline {
			args = quoteShort(args, argsInline)
		}
		return fmt.Sprintf("%s  %s", e.Tool, args)
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
		if n := len(e.Violations); n > 0 {
			s += fmt.Sprintf("  %d POLICY VIOLATION%s", n, plural(n))
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
		if e.Interrupted {
			s += "  INTERRUPTED (had begun when the run stopped; not run again)"
		}
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
	case Promotion:
		if len(e.Rejected) > 0 {
			return fmt.Sprintf("promotion REFUSED  %d violation%s, nothing promoted to %s", len(e.Rejected), plural(len(e.Rejected)), orDash(e.Dest))
		}
		return fmt.Sprintf("promotion  %d file%s to %s", len(e.Files), plural(len(e.Files)), orDash(e.Dest))
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

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func short(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// quoteShort is s on one line, cut to n runes.
func quoteShort(s string, n int) string {
	s = oneLine(s)
	r := []rune(s)
	if len(r) > n {
		s = string(r[:n]) + "…"
	}
	return s
}
