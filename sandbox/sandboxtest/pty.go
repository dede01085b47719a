package sandboxtest

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/sandbox"
)

func ptyTests() []testCase {
	return []testCase{
		{name: "a PTY shell runs what is typed and answers", needs: CapPTY, run: testPTYRoundTrip},
		{name: "a TTY exec has a terminal on stdin and a pipe exec does not", needs: CapPTY, run: testIsatty},
		{name: "a terminal resize is seen by stty", needs: CapPTY, run: testResize},
	}
}

// screen collects a process's terminal output for polling.
type screen struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	done chan struct{}
}

func watch(r io.Reader) *screen {
	sc := &screen{done: make(chan struct{})}
	go func() {
		defer close(sc.done)
		b := make([]byte, 4096)
		for {
			n, err := r.Read(b)
			sc.mu.Lock()
			sc.buf.Write(b[:n])
			sc.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return sc
}

func (sc *screen) String() string {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.buf.String()
}

// shows polls for up to d until the output contains want.
func (sc *screen) shows(want string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if strings.Contains(sc.String(), want) {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// waitFor polls until the output contains want.
func (sc *screen) waitFor(t *testing.T, want string) {
	t.Helper()
	if !sc.shows(want, 10*time.Second) {
		t.Fatalf("terminal output never showed %q; got %q", want, sc.String())
	}
}

func startShell(t *testing.T, sess sandbox.Session, rows, cols uint16) (sandbox.Process, *screen) {
	t.Helper()
	p, err := sess.Start(ctx(t), sandbox.ExecRequest{Cmd: []string{"sh"}, TTY: true, Rows: rows, Cols: cols})
	if err != nil {
		t.Fatalf("start sh with a TTY: %v", err)
	}
	t.Cleanup(func() { _ = p.Kill(context.Background()) })
	return p, watch(p.Stdout())
}

func exitShell(t *testing.T, p sandbox.Process, sc *screen) {
	t.Helper()
	if _, err := io.WriteString(p.Stdin(), "exit 3\n"); err != nil {
		t.Fatal(err)
	}
	st, err := p.Wait(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if st.ExitCode != 3 {
		t.Fatalf("shell exit %+v, want 3", st)
	}
	select {
	case <-sc.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the terminal output did not end after the shell exited")
	}
}

func testPTYRoundTrip(t *testing.T, s *suite) {
	_, sess := s.session(t)
	p, sc := startShell(t, sess, 24, 80)
	// The terminal echoes the typed line; only the shell's answer has the
	// computed value.
	if _, err := io.WriteString(p.Stdin(), "echo hi$((6*7))\n"); err != nil {
		t.Fatal(err)
	}
	sc.waitFor(t, "hi42")
	exitShell(t, p, sc)
}

func testIsatty(t *testing.T, s *suite) {
	_, sess := s.session(t)
	const script = "if test -t 0; then echo tty-yes; else echo tty-no; fi"
	res := sh(t, sess, script, func(r *sandbox.ExecRequest) { r.TTY = true })
	if !strings.Contains(string(res.Stdout), "tty-yes") {
		t.Fatalf("with TTY: %q", res.Stdout)
	}
	res = sh(t, sess, script)
	if strings.TrimSpace(string(res.Stdout)) != "tty-no" {
		t.Fatalf("without TTY: %q", res.Stdout)
	}
	res = sh(t, sess, "stty size", func(r *sandbox.ExecRequest) { r.TTY, r.Rows, r.Cols = true, 30, 90 })
	if !strings.Contains(string(res.Stdout), "30 90") {
		t.Fatalf("stty size with Rows 30 Cols 90 printed %q", res.Stdout)
	}
}

func testResize(t *testing.T, s *suite) {
	_, sess := s.session(t)
	p, sc := startShell(t, sess, 24, 80)
	if _, err := io.WriteString(p.Stdin(), "stty size\n"); err != nil {
		t.Fatal(err)
	}
	sc.waitFor(t, "24 80")
	if err := p.Resize(ctx(t), 40, 100); err != nil {
		t.Fatalf("resize: %v", err)
	}
	// The size may reach the terminal after Resize returns (as the kube
	// backend's, sent on the exec stream, which has no acknowledgement):
	// ask again until it shows, for up to 10 s.
	for range 20 {
		if _, err := io.WriteString(p.Stdin(), "stty size\n"); err != nil {
			t.Fatal(err)
		}
		if sc.shows("40 100", 500*time.Millisecond) {
			exitShell(t, p, sc)
			return
		}
	}
	t.Fatalf("terminal output never showed 40 100 after the resize; got %q", sc.String())
}
