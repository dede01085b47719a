package sandbox

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestExecRequestValidate(t *testing.T) {
	tests := []struct {
		name  string
		req   ExecRequest
		valid bool
	}{
		{"a command with arguments is valid", ExecRequest{Cmd: []string{"echo", "hi"}, Env: map[string]string{"A_B": "x=y"}}, true},
		{"no command is invalid", ExecRequest{}, false},
		{"an empty program name is invalid", ExecRequest{Cmd: []string{""}}, false},
		{"a negative timeout is invalid", ExecRequest{Cmd: []string{"true"}, Timeout: -1}, false},
		{"a negative output cap is invalid", ExecRequest{Cmd: []string{"true"}, MaxOutput: -1}, false},
		{"an empty variable name is invalid", ExecRequest{Cmd: []string{"true"}, Env: map[string]string{"": "x"}}, false},
		{"a variable name with = is invalid", ExecRequest{Cmd: []string{"true"}, Env: map[string]string{"A=B": "x"}}, false},
		{"a variable name with NUL is invalid", ExecRequest{Cmd: []string{"true"}, Env: map[string]string{"A\x00": "x"}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.req.Validate()
			if tt.valid != (err == nil) {
				t.Fatalf("Validate() = %v, want valid=%v", err, tt.valid)
			}
			if err != nil && !errors.Is(err, ErrInvalid) {
				t.Fatalf("Validate() = %v, want ErrInvalid", err)
			}
		})
	}
}

func TestEffectiveLimits(t *testing.T) {
	p := Policy{Resources: Resources{ExecTimeout: time.Minute, OutputBytes: 500}}
	tests := []struct {
		name        string
		req         ExecRequest
		p           Policy
		wantTimeout time.Duration
		wantMax     int64
	}{
		{"the request lowers the policy", ExecRequest{Timeout: time.Second, MaxOutput: 10}, p, time.Second, 10},
		{"the request cannot raise the policy", ExecRequest{Timeout: time.Hour, MaxOutput: 1 << 30}, p, time.Minute, 500},
		{"the policy applies when the request sets nothing", ExecRequest{}, p, time.Minute, 500},
		{"the request applies when the policy sets nothing", ExecRequest{Timeout: time.Hour, MaxOutput: 7}, Policy{}, time.Hour, 7},
		{"the default output cap applies when neither sets one", ExecRequest{}, Policy{}, 0, DefaultOutputBytes},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.req.EffectiveTimeout(tt.p); got != tt.wantTimeout {
				t.Errorf("timeout %v, want %v", got, tt.wantTimeout)
			}
			if got := tt.req.EffectiveMaxOutput(tt.p); got != tt.wantMax {
				t.Errorf("max output %d, want %d", got, tt.wantMax)
			}
		})
	}
}

func TestCappedBuffer(t *testing.T) {
	tests := []struct {
		name        string
		max         int64
		writes      []string
		wantKept    string
		wantDropped int64
	}{
		{"writes under the cap are kept", 10, []string{"abc", "def"}, "abcdef", 0},
		{"a write crossing the cap is split", 5, []string{"abc", "defg"}, "abcde", 2},
		{"writes after the cap are counted and dropped", 3, []string{"abc", "def", "g"}, "abc", 4},
		{"a zero cap keeps nothing", 0, []string{"abc"}, "", 3},
		{"exactly the cap is not truncated", 3, []string{"abc"}, "abc", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &CappedBuffer{Max: tt.max}
			for _, w := range tt.writes {
				n, err := b.Write([]byte(w))
				if n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v; a capped buffer must accept everything", w, n, err)
				}
			}
			if string(b.Bytes()) != tt.wantKept || b.Dropped() != tt.wantDropped || b.Truncated() != (tt.wantDropped > 0) {
				t.Fatalf("kept %q dropped %d truncated %v; want %q %d", b.Bytes(), b.Dropped(), b.Truncated(), tt.wantKept, tt.wantDropped)
			}
		})
	}
	t.Run("concurrent writers never exceed the cap", func(t *testing.T) {
		b := &CappedBuffer{Max: 1000}
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 100 {
					b.Write([]byte("0123456789"))
				}
			}()
		}
		wg.Wait()
		if len(b.Bytes()) != 1000 || b.Dropped() != 7000 {
			t.Fatalf("kept %d dropped %d", len(b.Bytes()), b.Dropped())
		}
	})
	t.Run("Bytes returns a copy", func(t *testing.T) {
		b := &CappedBuffer{Max: 10}
		b.Write([]byte("abc"))
		got := b.Bytes()
		got[0] = 'X'
		if string(b.Bytes()) != "abc" {
			t.Fatal("mutating the result of Bytes changed the buffer")
		}
	})
}

// fakeProcess is a test double of Process: its behaviour is a function
// that writes to the process's stdout and stderr and returns how it ended;
// Kill makes a running behaviour see its kill channel closed.
type fakeProcess struct {
	stdinR  *io.PipeReader
	stdinW  *io.PipeWriter
	outR    *io.PipeReader
	outW    *io.PipeWriter
	errR    *io.PipeReader
	errW    *io.PipeWriter
	killed  chan struct{}
	kill    sync.Once
	exited  chan struct{}
	status  ExitStatus
	waitErr error
}

type behaviour func(stdin io.Reader, stdout, stderr io.Writer, killed <-chan struct{}) (ExitStatus, error)

func startFake(b behaviour) *fakeProcess {
	f := &fakeProcess{killed: make(chan struct{}), exited: make(chan struct{})}
	f.stdinR, f.stdinW = io.Pipe()
	f.outR, f.outW = io.Pipe()
	f.errR, f.errW = io.Pipe()
	go func() {
		f.status, f.waitErr = b(f.stdinR, f.outW, f.errW, f.killed)
		f.outW.Close()
		f.errW.Close()
		f.stdinR.Close()
		close(f.exited)
	}()
	return f
}

func (f *fakeProcess) Stdin() io.WriteCloser                         { return f.stdinW }
func (f *fakeProcess) Stdout() io.Reader                             { return f.outR }
func (f *fakeProcess) Stderr() io.Reader                             { return f.errR }
func (f *fakeProcess) Resize(ctx context.Context, r, c uint16) error { return nil }
func (f *fakeProcess) Kill(ctx context.Context) error {
	f.kill.Do(func() { close(f.killed) })
	return nil
}
func (f *fakeProcess) Close() error {
	f.Kill(context.Background())
	return nil
}
func (f *fakeProcess) Wait(ctx context.Context) (ExitStatus, error) {
	select {
	case <-f.exited:
		return f.status, f.waitErr
	case <-ctx.Done():
		return ExitStatus{}, ctx.Err()
	}
}

func (f *fakeProcess) wasKilled() bool {
	select {
	case <-f.killed:
		return true
	default:
		return false
	}
}

// fakeSession is a Session whose Start hands out one fake process, fed
// as a backend's Start feeds ExecRequest.Stdin.
type fakeSession struct {
	Session // only Start and State are used
	p       *fakeProcess
	policy  Policy
}

func (s fakeSession) Start(_ context.Context, req ExecRequest) (Process, error) {
	if req.Stdin != nil {
		FeedStdin(s.p, req.Stdin)
	}
	return s.p, nil
}

func (s fakeSession) State() State { return State{Spec: Spec{Policy: s.policy}} }

// execFake runs req (with the given timeout and output cap as policy) on
// a session whose command is p.
func execFake(ctx context.Context, p *fakeProcess, req ExecRequest, timeout time.Duration, max int64) (ExecResult, error) {
	req.Cmd = []string{"fake"}
	return Exec(ctx, fakeSession{p: p, policy: Policy{Resources: Resources{ExecTimeout: timeout, OutputBytes: max}}}, req)
}

// hang runs until killed, then reports SIGKILL.
func hang(_ io.Reader, stdout, _ io.Writer, killed <-chan struct{}) (ExitStatus, error) {
	io.WriteString(stdout, "started\n")
	<-killed
	return ExitStatus{ExitCode: 137, Signal: "SIGKILL"}, nil
}

func TestExec(t *testing.T) {
	t.Run("output, exit status and duration are reported", func(t *testing.T) {
		p := startFake(func(_ io.Reader, out, errw io.Writer, _ <-chan struct{}) (ExitStatus, error) {
			io.WriteString(out, "to stdout")
			io.WriteString(errw, "to stderr")
			time.Sleep(10 * time.Millisecond)
			return ExitStatus{ExitCode: 3}, nil
		})
		res, err := execFake(context.Background(), p, ExecRequest{}, 0, 100)
		if err != nil || res.ExitCode != 3 || string(res.Stdout) != "to stdout" || string(res.Stderr) != "to stderr" {
			t.Fatalf("got %+v, %v", res, err)
		}
		if res.Duration < 10*time.Millisecond || res.TimedOut || res.OutputTruncated {
			t.Fatalf("duration %v timedout %v truncated %v", res.Duration, res.TimedOut, res.OutputTruncated)
		}
	})
	t.Run("stdin is fed and then closed", func(t *testing.T) {
		p := startFake(func(in io.Reader, out, _ io.Writer, _ <-chan struct{}) (ExitStatus, error) {
			_, err := io.Copy(out, in) // ends only when stdin is closed
			return ExitStatus{}, err
		})
		res, err := execFake(context.Background(), p, ExecRequest{Stdin: strings.NewReader("fed")}, 5*time.Second, 100)
		if err != nil || string(res.Stdout) != "fed" || res.TimedOut {
			t.Fatalf("got %+v, %v", res, err)
		}
	})
	t.Run("without stdin the process sees end of file at once", func(t *testing.T) {
		p := startFake(func(in io.Reader, out, _ io.Writer, _ <-chan struct{}) (ExitStatus, error) {
			n, _ := io.Copy(io.Discard, in)
			if n != 0 {
				return ExitStatus{ExitCode: 1}, nil
			}
			return ExitStatus{}, nil
		})
		res, err := execFake(context.Background(), p, ExecRequest{}, 5*time.Second, 100)
		if err != nil || res.ExitCode != 0 || res.TimedOut {
			t.Fatalf("got %+v, %v", res, err)
		}
	})
	t.Run("a timeout kills the process and reports TimedOut", func(t *testing.T) {
		p := startFake(hang)
		start := time.Now()
		res, err := execFake(context.Background(), p, ExecRequest{}, 50*time.Millisecond, 100)
		if err != nil || !res.TimedOut || res.ExitCode != 137 || !p.wasKilled() {
			t.Fatalf("got %+v, %v, killed %v", res, err, p.wasKilled())
		}
		if len(res.Violations) != 1 || res.Violations[0] != ExecTimeoutViolation(50*time.Millisecond) {
			t.Fatalf("violations %q, want the exec timeout's line", res.Violations)
		}
		if string(res.Stdout) != "started\n" {
			t.Fatalf("output before the kill was lost: %q", res.Stdout)
		}
		if time.Since(start) > 5*time.Second {
			t.Fatal("Exec took too long to return after the timeout")
		}
	})
	t.Run("a cancelled context kills the process and is an error, not a timeout", func(t *testing.T) {
		p := startFake(hang)
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(30*time.Millisecond, cancel)
		res, err := execFake(ctx, p, ExecRequest{}, 0, 100)
		if !errors.Is(err, context.Canceled) || res.TimedOut || !p.wasKilled() {
			t.Fatalf("got %+v, %v, killed %v; want context.Canceled and a kill", res, err, p.wasKilled())
		}
	})
	t.Run("output past the cap is drained and reported truncated", func(t *testing.T) {
		p := startFake(func(_ io.Reader, out, errw io.Writer, _ <-chan struct{}) (ExitStatus, error) {
			big := bytes.Repeat([]byte("y"), 64<<10)
			for range 16 { // 1 MiB: blocks forever if Exec stopped reading
				out.Write(big)
			}
			io.WriteString(errw, "ok")
			return ExitStatus{}, nil
		})
		res, err := execFake(context.Background(), p, ExecRequest{}, 5*time.Second, 1000)
		if err != nil || len(res.Stdout) != 1000 || !res.OutputTruncated || string(res.Stderr) != "ok" || res.TimedOut {
			t.Fatalf("got %d bytes, truncated %v, stderr %q, timedout %v, err %v", len(res.Stdout), res.OutputTruncated, res.Stderr, res.TimedOut, err)
		}
	})
	t.Run("a wait error is returned with the result", func(t *testing.T) {
		boom := errors.New("lost the process")
		p := startFake(func(_ io.Reader, out, _ io.Writer, _ <-chan struct{}) (ExitStatus, error) {
			io.WriteString(out, "partial")
			return ExitStatus{ExitCode: -1}, boom
		})
		res, err := execFake(context.Background(), p, ExecRequest{}, 0, 100)
		if !errors.Is(err, boom) || string(res.Stdout) != "partial" {
			t.Fatalf("got %+v, %v", res, err)
		}
	})
}
