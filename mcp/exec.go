package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox/agentbox/sandbox"
)

// progressEvery is how often exec reports that a command still runs.
const progressEvery = time.Second

// untilExit is the harness's yield that makes exec_command wait for the
// command's end: the harness caps a yield at the command's timeout.
const untilExit = 24 * time.Hour

// ttyYield is how long a terminal command runs before exec hands back its
// process_id.
const ttyYield = time.Second

type execArgs struct {
	SessionID      string          `json:"session_id"`
	Cmd            json.RawMessage `json:"cmd"`
	Workdir        string          `json:"workdir"`
	TimeoutSeconds int64           `json:"timeout_seconds"`
	TTY            bool            `json:"tty"`
}

// exec runs a command through the harness's exec_command (its timeout
// bounded by the session's policy, its output by the policy's cap with
// the truncation marker), and reports progress while it runs when the
// client asked for progress.
func (s *Server) exec(ctx context.Context, c *call) (string, error) {
	var a execArgs
	if err := c.decode(&a); err != nil {
		return "", err
	}
	if len(a.Cmd) == 0 || string(a.Cmd) == "null" {
		return "", sandbox.Errorf(sandbox.ErrInvalid, "exec: cmd is required (a shell command line, or an argv list)")
	}
	if a.TimeoutSeconds < 0 {
		return "", sandbox.Errorf(sandbox.ErrInvalid, "exec: timeout_seconds must be positive")
	}
	b, err := c.session(ctx, a.SessionID, true)
	if err != nil {
		return "", fmt.Errorf("exec: %w", err)
	}
	yield := untilExit
	if a.TTY {
		yield = ttyYield
	}
	args := map[string]any{"cmd": a.Cmd, "yield_time_ms": yield.Milliseconds(), "tty": a.TTY}
	if a.Workdir != "" {
		args["workdir"] = a.Workdir
	}
	if a.TimeoutSeconds > 0 {
		args["timeout_ms"] = a.TimeoutSeconds * 1000
	}
	stop := c.reportProgress(ctx, display(a.Cmd))
	out, err := c.harness(ctx, b, "exec_command", args)
	stop()
	return processIDs(out), err
}

type stdinArgs struct {
	SessionID string `json:"session_id"`
	ProcessID int    `json:"process_id"`
	Chars     string `json:"chars"`
	WaitMS    int64  `json:"wait_ms"`
}

func (s *Server) writeStdin(ctx context.Context, c *call) (string, error) {
	var a stdinArgs
	if err := c.decode(&a); err != nil {
		return "", err
	}
	b, err := c.session(ctx, a.SessionID, false)
	if err != nil {
		return "", fmt.Errorf("write_stdin: %w", err)
	}
	args := map[string]any{"session_id": a.ProcessID, "chars": a.Chars}
	if a.WaitMS > 0 {
		args["yield_time_ms"] = a.WaitMS
	}
	out, err := c.harness(ctx, b, "write_stdin", args)
	return processIDs(out), err
}

// harnessProc is how the harness's shell names a running command: its
// "session_id" is a process here, and a sandbox is a session.
var harnessProc = regexp.MustCompile(`(?m)^session_id: (\d+) \(still running; use write_stdin\)$`)

func processIDs(out string) string {
	return harnessProc.ReplaceAllString(out, "process_id: $1 (still running; use write_stdin with this process_id)")
}

// reportProgress sends a progress notification every progressEvery while
// the call runs, when the client gave a progress token; the returned
// function stops it.
func (c *call) reportProgress(ctx context.Context, what string) func() {
	token := c.req.Params.GetProgressToken()
	if token == nil || c.req.Session == nil {
		return func() {}
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		start := time.Now()
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				el := time.Since(start).Round(time.Second)
				_ = c.req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{
					ProgressToken: token,
					Progress:      el.Seconds(),
					Message:       fmt.Sprintf("running for %s: %s", el, what),
				})
			}
		}
	}()
	return func() { close(done); <-stopped }
}

// display is a command as the model wrote it, bounded.
func display(cmd json.RawMessage) string {
	var line string
	if json.Unmarshal(cmd, &line) == nil {
		return clip(line, 200)
	}
	var argv []string
	if json.Unmarshal(cmd, &argv) == nil {
		return clip(fmt.Sprint(argv), 200)
	}
	return ""
}
