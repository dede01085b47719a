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
	// Stdin, when set, is copied to the command's standard input for Exec.
	Stdin io.Reader `json:"-"`
	// Timeout overrides the policy's ExecTimeout when positive.
	Timeout time.Duration `json:"timeout,omitempty"`
	// MaxOutput overrides the policy's OutputBytes when positive.
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

// EffectiveTimeout is the request's timeout, else the policy's.
func (r ExecRequest) EffectiveTimeout(p Policy) time.Duration {
	if r.Timeout > 0 {
		return r.Timeout
	}
	return p.Resources.ExecTimeout
}

// EffectiveMaxOutput is the request's output cap, else the policy's, else
// DefaultOutputBytes.
func (r ExecRequest) EffectiveMaxOutput(p Policy) int64 {
	switch {
	case r.MaxOutput > 0:
		return r.MaxOutput
	case p.Resources.OutputBytes > 0:
		return p.Resources.OutputBytes
	}
	return DefaultOutputBytes
}

// Collect runs a started process to completion the way Exec does: it feeds
// stdin, captures each stream up to max bytes (draining and dropping the
// rest), kills the process tree when timeout (if positive) passes or ctx
// ends, and reports the result. Backends implement Exec as Start+Collect.
func Collect(ctx context.Context, p Process, stdin io.Reader, timeout time.Duration, max int64) (ExecResult, error) {
	start := time.Now()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	if stdin != nil {
		go func() {
			_, _ = io.Copy(p.Stdin(), stdin)
			_ = p.Stdin().Close()
		}()
	} else {
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
	if timedOut {
		res.TimedOut = true
	}
	if werr != nil {
		return res, werr
	}
	if ctx.Err() != nil && !timedOut {
		return res, Wrap("exec", nil, ctx.Err())
	}
	return res, nil
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
