package sandbox

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"time"
)

// ExecRequest is one command to run in a session.
type ExecRequest struct {
	// Cmd is the program and its arguments; Cmd[0] is looked up in the
	// sandbox's PATH when it has no slash.
	Cmd []string `json:"cmd"`
	// Workdir is the sandbox directory to start in; default the session's
	// workdir. Relative paths are taken from the session's workdir.
	Workdir string `json:"workdir,omitempty"`
	// Env is added to (and overrides) the session's environment.
	Env map[string]string `json:"env,omitempty"`
	// Stdin, when set, is copied to the command's standard input, which
	// is closed at its end; without it, Exec closes standard input at once
	// and Start leaves it to the caller (Process.Stdin).
	Stdin io.Reader `json:"-"`
	// Timeout, when positive, lowers the policy's ExecTimeout for this
	// command; it can never raise it (see EffectiveTimeout).
	Timeout time.Duration `json:"timeout,omitempty"`
	// MaxOutput, when positive, lowers the policy's OutputBytes for this
	// command; it can never raise it.
	MaxOutput int64 `json:"max_output,omitempty"`
	// TTY gives the command a pseudo-terminal of Rows x Cols.
	TTY  bool   `json:"tty,omitempty"`
	Rows uint16 `json:"rows,omitempty"`
	Cols uint16 `json:"cols,omitempty"`
}

// ExecResult is what Exec reports of a finished command.
type ExecResult struct {
	ExitStatus
	Stdout []byte `json:"stdout"`
	Stderr []byte `json:"stderr"`
	// Duration is the wall-clock time from start to exit.
	Duration time.Duration `json:"duration"`
	// OutputTruncated is set when a stream passed its cap; the bytes past
	// the cap were read and dropped.
	OutputTruncated bool `json:"output_truncated,omitempty"`
}

// Validate reports a malformed request.
func (r ExecRequest) Validate() error {
	if len(r.Cmd) == 0 || r.Cmd[0] == "" {
		return Errorf(ErrInvalid, "exec: empty command")
	}
	if r.Timeout < 0 || r.MaxOutput < 0 {
		return Errorf(ErrInvalid, "exec: negative timeout or output cap")
	}
	for k := range r.Env {
		if k == "" || bytes.ContainsAny([]byte(k), "=\x00") {
			return Errorf(ErrInvalid, "exec: bad environment variable name %q", k)
		}
	}
	return nil
}

// EffectiveTimeout is the command's wall-clock limit: the request's when
// it sets one no longer than the policy's, else the policy's. The policy
// is a ceiling: a request can lower it, never raise it.
func (r ExecRequest) EffectiveTimeout(p Policy) time.Duration {
	return ceiling(r.Timeout, p.Resources.ExecTimeout, 0)
}

// EffectiveMaxOutput is the per-stream output cap: the request's when it
// sets one no larger than the policy's, else the policy's, else
// DefaultOutputBytes. The policy is a ceiling, as for EffectiveTimeout.
func (r ExecRequest) EffectiveMaxOutput(p Policy) int64 {
	return ceiling(r.MaxOutput, p.Resources.OutputBytes, DefaultOutputBytes)
}

// ceiling is asked (0: not asked) bounded by limit (0: none), or def when
// neither is set.
func ceiling[T ~int64](asked, limit, def T) T {
	switch {
	case asked > 0 && (limit == 0 || asked < limit):
		return asked
	case limit > 0:
		return limit
	}
	return def
}

// Exec runs req in s to completion: it starts the command (Session.Start),
// closes its standard input at once unless req.Stdin feeds it, captures
// each output stream up to the effective cap (draining and dropping the
// rest), kills the process tree when the effective timeout passes or ctx
// ends, and reports how the command ended. It is the one way every backend
// runs a command to completion.
func Exec(ctx context.Context, s Session, req ExecRequest) (ExecResult, error) {
	pol := s.State().Spec.Policy
	timeout, max := req.EffectiveTimeout(pol), req.EffectiveMaxOutput(pol)
	start := time.Now()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	p, err := s.Start(ctx, req)
	if err != nil {
		return ExecResult{}, err
	}
	defer p.Close()
	if req.Stdin == nil {
		_ = p.Stdin().Close()
	}
	out := &CappedBuffer{Max: max}
	errb := &CappedBuffer{Max: max}
	var wg sync.WaitGroup
	drain := func(dst io.Writer, src io.Reader) {
		defer wg.Done()
		if src != nil {
			_, _ = io.Copy(dst, src)
		}
	}
	wg.Add(2)
	go drain(out, p.Stdout())
	go drain(errb, p.Stderr())

	waited := make(chan struct{})
	var st ExitStatus
	var werr error
	go func() {
		defer close(waited)
		wg.Wait()
		st, werr = p.Wait(context.WithoutCancel(ctx))
	}()
	var timedOut bool
	select {
	case <-waited:
	case <-ctx.Done():
		timedOut = errors.Is(ctx.Err(), context.DeadlineExceeded)
		_ = p.Kill(context.WithoutCancel(ctx))
		<-waited
	}
	res := ExecResult{
		ExitStatus:      st,
		Stdout:          out.Bytes(),
		Stderr:          errb.Bytes(),
		Duration:        time.Since(start),
		OutputTruncated: out.Truncated() || errb.Truncated(),
	}
	if timedOut && !res.TimedOut {
		res.TimedOut = true
		res.Violations = append(res.Violations, ExecTimeoutViolation(timeout))
	}
	if werr != nil {
		return res, werr
	}
	if ctx.Err() != nil && !timedOut {
		return res, Wrap("exec", nil, ctx.Err())
	}
	return res, nil
}

// FeedStdin copies r to p's standard input and closes it at r's end, in
// the background: what a backend's Start does with ExecRequest.Stdin.
func FeedStdin(p Process, r io.Reader) {
	go func() {
		_, _ = io.Copy(p.Stdin(), r)
		_ = p.Stdin().Close()
	}()
}

// CappedBuffer keeps the first Max bytes written to it and counts the rest.
// Writes never fail, so a producer is drained rather than blocked.
type CappedBuffer struct {
	Max     int64
	mu      sync.Mutex
	buf     bytes.Buffer
	dropped int64
}

func (c *CappedBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	room := c.Max - int64(c.buf.Len())
	if room < 0 {
		room = 0
	}
	if int64(len(p)) <= room {
		c.buf.Write(p)
	} else {
		c.buf.Write(p[:room])
		c.dropped += int64(len(p)) - room
	}
	return len(p), nil
}

// Bytes is a copy of what was kept.
func (c *CappedBuffer) Bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.buf.Bytes())
}

// Truncated reports whether anything was dropped.
func (c *CappedBuffer) Truncated() bool { return c.Dropped() > 0 }

// Dropped is the number of bytes dropped past Max.
func (c *CappedBuffer) Dropped() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dropped
}
