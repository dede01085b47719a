package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/agentbox/agentbox/sandbox"
)

// Shell is the capability that runs commands in the session: exec_command
// starts a command (optionally on a pseudo-terminal) and returns its exit
// code and output, or a session_id while it still runs; write_stdin types
// into a running terminal program and reads what it printed since.
type Shell struct {
	// Timeout is a command's default wall-clock limit (default 2m); the
	// model may ask for up to MaxTimeout (default 30m) with timeout_ms.
	// The session policy's exec timeout bounds both: a tool call can
	// lower it, never raise it.
	Timeout    time.Duration
	MaxTimeout time.Duration
	// MaxProcesses bounds the running processes kept per session (default
	// 8); starting one more ends the least recently used.
	MaxProcesses int

	mu       sync.Mutex
	sessions map[string]*procTable
}

const (
	defaultShellTimeout    = 2 * time.Minute
	defaultShellMaxTimeout = 30 * time.Minute
	defaultMaxProcesses    = 8
	// defaultYield is how long exec_command waits before handing back a
	// session_id; a command that ends sooner returns at once.
	defaultYield    = 10 * time.Second
	defaultTTYYield = time.Second
	// defaultStdinYield is write_stdin's default wait for new output.
	defaultStdinYield = 250 * time.Millisecond
	// killGrace is how long to wait for a killed process to end.
	killGrace = 5 * time.Second
)

// Name implements Capability.
func (s *Shell) Name() string { return "shell" }

// Instructions implements Capability.
func (s *Shell) Instructions() string {
	return `# Shell
Run commands with exec_command. "cmd" is a shell command line (run with sh -lc) or an argv list. It returns the exit code, the wall time and the combined output. A command still running after yield_time_ms (or started with tty: true, for interactive programs) returns a session_id: send input and read new output with write_stdin (chars may be empty to just wait for output). Commands are killed after timeout_ms.`
}

// Tools implements Capability.
func (s *Shell) Tools(sess sandbox.Session) []Tool {
	t := s.table(sess)
	return []Tool{
		{Spec: execCommandSpec, Call: t.execCommand, MaxOutput: -1},
		{Spec: writeStdinSpec, Call: t.writeStdin, MaxOutput: -1},
	}
}

// CloseSession kills every process still running in sess.
func (s *Shell) CloseSession(ctx context.Context, sess sandbox.Session) error {
	s.mu.Lock()
	t := s.sessions[sess.ID()]
	delete(s.sessions, sess.ID())
	s.mu.Unlock()
	if t == nil {
		return nil
	}
	return t.closeAll(ctx)
}

func (s *Shell) table(sess sandbox.Session) *procTable {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sessions == nil {
		s.sessions = map[string]*procTable{}
	}
	if t, ok := s.sessions[sess.ID()]; ok {
		return t
	}
	t := &procTable{
		sess:       sess,
		policy:     sess.State().Spec.Policy,
		timeout:    orDuration(s.Timeout, defaultShellTimeout),
		maxTimeout: orDuration(s.MaxTimeout, defaultShellMaxTimeout),
		max:        s.MaxProcesses,
		procs:      map[int]*runningProc{},
	}
	if t.max <= 0 {
		t.max = defaultMaxProcesses
	}
	s.sessions[sess.ID()] = t
	return t
}

func orDuration(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

var execCommandSpec = mustSpec("exec_command", "Run a command in the sandbox workspace and return its exit code and output, or a session_id if it is still running.", `{
  "type": "object",
  "properties": {
    "cmd": {"description": "Shell command line (run with sh -lc), or an argv list.", "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]},
    "workdir": {"type": "string", "description": "Directory to run in, absolute or relative to the workspace."},
    "timeout_ms": {"type": "integer", "description": "Kill the command after this many milliseconds."},
    "yield_time_ms": {"type": "integer", "description": "Return a session_id if the command still runs after this many milliseconds."},
    "max_output_tokens": {"type": "integer", "description": "Cap the returned output at about this many tokens."},
    "tty": {"type": "boolean", "description": "Run on a pseudo-terminal, for interactive programs."}
  },
  "required": ["cmd"],
  "additionalProperties": false
}`)

var writeStdinSpec = mustSpec("write_stdin", "Write characters to a running exec_command session (started with tty) and return its new output.", `{
  "type": "object",
  "properties": {
    "session_id": {"type": "integer", "description": "The session_id exec_command returned."},
    "chars": {"type": "string", "description": "Characters to send (use \n for Enter); empty to only read new output."},
    "yield_time_ms": {"type": "integer", "description": "How long to wait for output, in milliseconds."},
    "max_output_tokens": {"type": "integer", "description": "Cap the returned output at about this many tokens."}
  },
  "required": ["session_id"],
  "additionalProperties": false
}`)

type execArgs struct {
	Cmd             json.RawMessage `json:"cmd"`
	Workdir         string          `json:"workdir"`
	TimeoutMS       int64           `json:"timeout_ms"`
	YieldTimeMS     int64           `json:"yield_time_ms"`
	MaxOutputTokens int             `json:"max_output_tokens"`
	TTY             bool            `json:"tty"`
}

// argv turns cmd (a string or a list) into a command vector and a display
// form.
func (a execArgs) argv() ([]string, string, error) {
	var line string
	if json.Unmarshal(a.Cmd, &line) == nil {
		if strings.TrimSpace(line) == "" {
			return nil, "", fmt.Errorf("exec_command: cmd is empty")
		}
		return []string{"sh", "-lc", line}, line, nil
	}
	var list []string
	if err := json.Unmarshal(a.Cmd, &list); err != nil || len(list) == 0 || list[0] == "" {
		return nil, "", fmt.Errorf("exec_command: cmd must be a non-empty string or a list of strings")
	}
	return list, strings.Join(list, " "), nil
}

// commandTimeout is a command's wall-clock limit: the shell's default, or
// what the call asked (bounded by the shell's MaxTimeout), never more than
// the policy's exec timeout.
func (t *procTable) commandTimeout(askedMS int64) time.Duration {
	d := t.timeout
	if askedMS > 0 {
		d = min(time.Duration(askedMS)*time.Millisecond, t.maxTimeout)
	}
	return sandbox.ExecRequest{Timeout: d}.EffectiveTimeout(t.policy)
}

// outputCap is the byte cap for a tool's returned output: about
// maxTokens tokens when the call asks, else DefaultToolOutputBytes, never
// more than the policy's output cap.
func (t *procTable) outputCap(maxTokens int) int {
	asked := int64(DefaultToolOutputBytes)
	if maxTokens > 0 {
		asked = int64(maxTokens) * 4
	}
	return int(sandbox.ExecRequest{MaxOutput: asked}.EffectiveMaxOutput(t.policy))
}

func (t *procTable) execCommand(ctx context.Context, raw json.RawMessage) (string, error) {
	var a execArgs
	if err := decodeArgs("exec_command", raw, &a); err != nil {
		return "", err
	}
	argv, display, err := a.argv()
	if err != nil {
		return "", err
	}
	timeout := t.commandTimeout(a.TimeoutMS)
	yield := defaultYield
	if a.TTY {
		yield = defaultTTYYield
	}
	if a.YieldTimeMS > 0 {
		yield = time.Duration(a.YieldTimeMS) * time.Millisecond
	}
	if yield >= timeout {
		// The command is killed at its timeout; wait for that (and a
		// moment for the kill to land) rather than hand back a session.
		yield = timeout + 2*time.Second
	}
	p, err := t.start(ctx, argv, display, a.Workdir, a.TTY, timeout)
	if err != nil {
		return "", err
	}
	return t.waitAndReport(ctx, p, yield, t.outputCap(a.MaxOutputTokens))
}

type stdinArgs struct {
	SessionID       int    `json:"session_id"`
	Chars           string `json:"chars"`
	YieldTimeMS     int64  `json:"yield_time_ms"`
	MaxOutputTokens int    `json:"max_output_tokens"`
}

func (t *procTable) writeStdin(ctx context.Context, raw json.RawMessage) (string, error) {
	var a stdinArgs
	if err := decodeArgs("write_stdin", raw, &a); err != nil {
		return "", err
	}
	p := t.get(a.SessionID)
	if p == nil {
		return "", fmt.Errorf("write_stdin: no running session %d (it exited, was never started, or was ended to make room); start it again with exec_command", a.SessionID)
	}
	if a.Chars != "" {
		if !p.tty {
			return "", fmt.Errorf("write_stdin: session %d was not started with tty: true, so its input is closed", a.SessionID)
		}
		if _, err := p.proc.Stdin().Write([]byte(a.Chars)); err != nil {
			return "", fmt.Errorf("write_stdin: write to session %d: %w", a.SessionID, err)
		}
	}
	yield := defaultStdinYield
	if a.YieldTimeMS > 0 {
		yield = time.Duration(a.YieldTimeMS) * time.Millisecond
	}
	return t.waitAndReport(ctx, p, yield, t.outputCap(a.MaxOutputTokens))
}

// waitAndReport waits up to yield for p to end, then describes it: the
// exit status if it ended (and drops it from the table), else its
// session_id. Either way it returns the output not read before.
func (t *procTable) waitAndReport(ctx context.Context, p *runningProc, yield time.Duration, max int) (string, error) {
	timer := time.NewTimer(yield)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
	case <-ctx.Done():
		_ = p.proc.Kill(context.WithoutCancel(ctx))
		select {
		case <-p.done:
		case <-time.After(killGrace):
			// Something outlived the kill and holds the output open; the
			// session's close will deal with it.
		}
	}
	var b strings.Builder
	select {
	case <-p.done:
		t.remove(p.id)
		st := p.status
		code := st.ExitCode
		ReportExec(ctx, ExecReport{Cmd: p.display, ExitCode: &code, TimedOut: st.TimedOut || p.timedOut.Load(), Duration: p.ended.Sub(p.started), Violations: st.Violations})
		fmt.Fprintf(&b, "exit code: %d\n", code)
		if st.Signal != "" {
			fmt.Fprintf(&b, "signal: %s\n", st.Signal)
		}
		if st.TimedOut || p.timedOut.Load() {
			fmt.Fprintf(&b, "timed out: killed after %s\n", p.timeout)
		}
		if st.OOMKilled {
			b.WriteString("killed: out of memory\n")
		}
		for _, v := range st.Violations {
			fmt.Fprintf(&b, "policy: %s\n", v)
		}
		if p.waitErr != nil {
			fmt.Fprintf(&b, "error: %v\n", p.waitErr)
		}
		fmt.Fprintf(&b, "wall time: %s\n", roundDuration(p.ended.Sub(p.started)))
	default:
		t.touch(p)
		ReportExec(ctx, ExecReport{Cmd: p.display, Running: true, Duration: time.Since(p.started)})
		fmt.Fprintf(&b, "session_id: %d (still running; use write_stdin)\n", p.id)
		fmt.Fprintf(&b, "wall time so far: %s\n", roundDuration(time.Since(p.started)))
	}
	if note := t.takeNote(); note != "" {
		b.WriteString(note + "\n")
	}
	out, dropped := p.out.take()
	if dropped > 0 {
		fmt.Fprintf(&b, "(%d bytes of output were dropped while nobody read them)\n", dropped)
	}
	b.WriteString("output:\n")
	body, _ := Truncate(string(out), max)
	b.WriteString(body)
	return b.String(), nil
}

func roundDuration(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(10 * time.Millisecond)
}
