package agent

import (
	"context"
	"time"
)

// ExecReport is what a tool tells the runner about a command it ran in the
// sandbox, for the trace and live progress.
type ExecReport struct {
	Cmd      string
	ExitCode *int
	TimedOut bool
	// Running is set when the command still runs in the background (a PTY
	// session the model can write to).
	Running  bool
	Duration time.Duration
	// Violations are the policy violations the backend reported for it.
	Violations []string
}

type reporterKey struct{}

// ReportExec lets a tool (a custom one too) record a sandbox command it
// ran; it does nothing outside a run.
func ReportExec(ctx context.Context, r ExecReport) {
	if f, ok := ctx.Value(reporterKey{}).(func(ExecReport)); ok {
		f(r)
	}
}

func withReporter(ctx context.Context, f func(ExecReport)) context.Context {
	return context.WithValue(ctx, reporterKey{}, f)
}

// WithExecReporter returns ctx with f receiving what tools report through
// ReportExec, for a caller of tools outside a run (the MCP server) that
// records the commands they ran as the runner does.
func WithExecReporter(ctx context.Context, f func(ExecReport)) context.Context {
	return withReporter(ctx, f)
}
