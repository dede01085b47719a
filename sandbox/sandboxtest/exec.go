package sandboxtest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/sandbox"
)

func execTests() []testCase {
	return []testCase{
		{name: "echo prints its arguments on stdout", run: testEcho},
		{name: "exit codes are reported as the command returned them", run: testExitCodes},
		{name: "stdout and stderr are captured apart", run: testStreams},
		{name: "the environment comes from the spec and the request, never the host", run: testEnv},
		{name: "commands start in the workdir and the request's workdir is honoured", run: testWorkdir},
		{name: "stdin is fed to the command and is empty when not given", run: testStdin},
		{name: "Start feeds the request's stdin and closes it at its end", run: testStartStdin},
		{name: "a timeout kills the whole process tree quickly", run: testTimeoutKillsTree},
		{name: "the policy's limits are ceilings a request can lower but never raise", run: testPolicyCeilings},
		{name: "closing a process kills the command it started", run: testProcessClose},
		{name: "output read late is whole and in order", run: testLateReader},
		{name: "output past the cap is dropped and reported", run: testOutputCap},
		{name: "an empty command is refused as invalid", run: testEmptyCommand},
		{name: "eight concurrent execs all succeed", run: testConcurrentExecs},
	}
}

func testEcho(t *testing.T, s *suite) {
	_, sess := s.session(t)
	res, err := sandbox.Exec(ctx(t), sess, sandbox.ExecRequest{Cmd: []string{"echo", "hello", "world"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || string(res.Stdout) != "hello world\n" || len(res.Stderr) != 0 {
		t.Fatalf("got exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	if res.Duration <= 0 {
		t.Errorf("duration %v, want > 0", res.Duration)
	}
}

func testExitCodes(t *testing.T, s *suite) {
	_, sess := s.session(t)
	for _, code := range []int{0, 1, 42} {
		t.Run(fmt.Sprintf("exit %d is reported as %d", code, code), func(t *testing.T) {
			res := sh(t, sess, fmt.Sprintf("exit %d", code))
			if res.ExitCode != code || res.TimedOut || res.Signal != "" {
				t.Fatalf("got %+v", res.ExitStatus)
			}
		})
	}
	t.Run("a command killed by a signal reports 128 plus the signal", func(t *testing.T) {
		res := sh(t, sess, "kill -9 $$")
		// Signal is optional: an engine may report only the code.
		if res.ExitCode != 137 || (res.Signal != "" && res.Signal != "SIGKILL") {
			t.Fatalf("got %+v, want exit 137 (and SIGKILL if a signal is named)", res.ExitStatus)
		}
	})
}

func testStreams(t *testing.T, s *suite) {
	_, sess := s.session(t)
	res := shOK(t, sess, "echo out1; echo err1 >&2; echo out2; echo err2 >&2")
	if string(res.Stdout) != "out1\nout2\n" || string(res.Stderr) != "err1\nerr2\n" {
		t.Fatalf("stdout %q stderr %q", res.Stdout, res.Stderr)
	}
}

// hostCanary is set in the test process's environment; no backend may
// pass it to commands.
const hostCanary = "AGENTBOX_SUITE_HOST_CANARY"

func testEnv(t *testing.T, s *suite) {
	t.Setenv(hostCanary, "leaked-from-host")
	_, sess := s.session(t, func(sp *sandbox.Spec) {
		if sp.Env == nil {
			sp.Env = map[string]string{}
		}
		sp.Env["SUITE_SPEC"] = "from-spec"
		sp.Env["SUITE_BOTH"] = "spec-loses"
	})
	res := shOK(t, sess, "env", func(r *sandbox.ExecRequest) {
		r.Env = map[string]string{"SUITE_REQ": "from-request", "SUITE_BOTH": "request-wins"}
	})
	env := map[string]string{}
	for _, line := range strings.Split(string(res.Stdout), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			env[k] = v
		}
	}
	for k, want := range map[string]string{"SUITE_SPEC": "from-spec", "SUITE_REQ": "from-request", "SUITE_BOTH": "request-wins"} {
		if env[k] != want {
			t.Errorf("%s = %q, want %q", k, env[k], want)
		}
	}
	if v, ok := env[hostCanary]; ok {
		t.Errorf("host variable %s=%q is visible in the sandbox", hostCanary, v)
	}
	if env["PATH"] == "" {
		t.Error("PATH is not set")
	}
	// The request's variables do not stick to the session.
	res = shOK(t, sess, `printf '%s' "${SUITE_REQ-unset}"`)
	if string(res.Stdout) != "unset" {
		t.Errorf("a request's env leaked into the next exec: SUITE_REQ=%q", res.Stdout)
	}
}

func testWorkdir(t *testing.T, s *suite) {
	_, sess := s.session(t)
	c := ctx(t)
	if err := sess.WriteFile(c, "top-marker", []byte("top\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := sess.WriteFile(c, "sub/dir/deep-marker", []byte("deep\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res := shOK(t, sess, "cat top-marker")
	if string(res.Stdout) != "top\n" {
		t.Fatalf("default cwd: cat top-marker = %q", res.Stdout)
	}
	workdir := sess.State().Spec.Workdir
	if workdir == "" {
		workdir = sandbox.DefaultWorkdir
	}
	for _, wd := range []string{"sub/dir", workdir + "/sub/dir"} {
		t.Run("workdir "+wd, func(t *testing.T) {
			res := shOK(t, sess, "cat deep-marker", func(r *sandbox.ExecRequest) { r.Workdir = wd })
			if string(res.Stdout) != "deep\n" {
				t.Fatalf("cat deep-marker = %q", res.Stdout)
			}
		})
	}
	t.Run("a missing workdir is an error, not a silent fallback", func(t *testing.T) {
		res, err := sandbox.Exec(c, sess, sandbox.ExecRequest{Cmd: []string{"sh", "-c", "pwd"}, Workdir: "no/such/dir"})
		if err == nil && res.ExitCode == 0 {
			t.Fatalf("exec in a missing workdir succeeded in %q", res.Stdout)
		}
	})
}

func testStdin(t *testing.T, s *suite) {
	_, sess := s.session(t)
	res := shOK(t, sess, "cat; echo done", func(r *sandbox.ExecRequest) {
		r.Stdin = strings.NewReader("line one\nline two\n")
	})
	if string(res.Stdout) != "line one\nline two\ndone\n" {
		t.Fatalf("stdout %q", res.Stdout)
	}
	// Without stdin, a reader sees end of file at once instead of hanging.
	res = shOK(t, sess, "cat; echo eof", func(r *sandbox.ExecRequest) { r.Timeout = 10 * time.Second })
	if string(res.Stdout) != "eof\n" {
		t.Fatalf("stdout %q", res.Stdout)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<14) // 256 KiB, past a pipe buffer
	res = shOK(t, sess, "wc -c", func(r *sandbox.ExecRequest) { r.Stdin = bytes.NewReader(big) })
	if strings.TrimSpace(string(res.Stdout)) != fmt.Sprint(len(big)) {
		t.Fatalf("wc -c of %d bytes of stdin = %q", len(big), res.Stdout)
	}
}

func testTimeoutKillsTree(t *testing.T, s *suite) {
	_, sess := s.session(t)
	// The shell must get as far as starting its background child before
	// the timeout strikes, or there is no tree to kill: on a loaded host
	// it may not within 300ms, so the timeout grows until it does.
	for _, timeout := range []time.Duration{300 * time.Millisecond, time.Second, 3 * time.Second} {
		start := time.Now()
		res, err := sandbox.Exec(ctx(t), sess, sandbox.ExecRequest{
			Cmd:     []string{"sh", "-c", "sleep 30 & echo $! > bg.pid; sleep 30"},
			Timeout: timeout,
		})
		elapsed := time.Since(start)
		if err != nil && !errors.Is(err, sandbox.ErrTimeout) {
			t.Fatalf("exec: %v", err)
		}
		if !res.TimedOut {
			t.Fatalf("TimedOut is false: %+v", res.ExitStatus)
		}
		if res.ExitCode == 0 {
			t.Errorf("a killed command reported exit 0")
		}
		if elapsed > timeout+5*time.Second {
			t.Fatalf("a %v timeout took %v to return", timeout, elapsed)
		}
		if _, err := sess.ReadFile(ctx(t), "bg.pid"); err == nil {
			break
		}
		t.Logf("the shell had not started its background child within %v; trying a longer timeout", timeout)
	}
	// The background sleep must be gone too. A dead process may linger
	// briefly as a zombie until its new parent reaps it: poll, and count a
	// zombie as dead.
	script := `pid=$(cat bg.pid) || exit 2
	for i in $(seq 1 40); do
		if [ ! -e /proc/$pid ] || grep -q '^State:.*Z' /proc/$pid/status 2>/dev/null; then echo dead; exit 0; fi
		sleep 0.05
	done
	echo alive; cat /proc/$pid/cmdline | tr '\0' ' '`
	out := shOK(t, sess, script)
	if !strings.HasPrefix(string(out.Stdout), "dead") {
		t.Fatalf("the background child survived the timeout: %s", out.Stdout)
	}
}

func testOutputCap(t *testing.T, s *suite) {
	_, sess := s.session(t)
	res, err := sandbox.Exec(ctx(t), sess, sandbox.ExecRequest{
		Cmd:       []string{"sh", "-c", "yes | head -c 5000000; echo tail >&2"},
		MaxOutput: 1000,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Stdout) != 1000 || !res.OutputTruncated {
		t.Fatalf("got %d bytes of stdout, truncated=%v; want 1000 and true", len(res.Stdout), res.OutputTruncated)
	}
	if !bytes.Equal(res.Stdout, bytes.Repeat([]byte("y\n"), 500)) {
		t.Fatalf("the kept output is not the first 1000 bytes: %q...", res.Stdout[:20])
	}
	if string(res.Stderr) != "tail\n" {
		t.Fatalf("stderr %q: the command did not run to the end after its output was capped", res.Stderr)
	}
	if res.ExitCode != 0 {
		t.Fatalf("exit %d", res.ExitCode)
	}
}

func testEmptyCommand(t *testing.T, s *suite) {
	_, sess := s.session(t)
	if _, err := sandbox.Exec(ctx(t), sess, sandbox.ExecRequest{}); !errors.Is(err, sandbox.ErrInvalid) {
		t.Fatalf("err = %v, want ErrInvalid", err)
	}
}

func testConcurrentExecs(t *testing.T, s *suite) {
	_, sess := s.session(t)
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := sandbox.Exec(ctx(t), sess, sandbox.ExecRequest{
				Cmd: []string{"sh", "-c", fmt.Sprintf("echo %d > c%d.txt; sleep 0.1; cat c%d.txt", i, i, i)},
			})
			switch {
			case err != nil:
				errs[i] = err
			case res.ExitCode != 0 || string(res.Stdout) != fmt.Sprintf("%d\n", i):
				errs[i] = fmt.Errorf("exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("exec %d: %v", i, err)
		}
	}
}

func testStartStdin(t *testing.T, s *suite) {
	_, sess := s.session(t)
	p, err := sess.Start(ctx(t), sandbox.ExecRequest{Cmd: []string{"sh", "-c", "cat; echo done"}, Stdin: strings.NewReader("fed\n")})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var out bytes.Buffer
	done := make(chan struct{})
	go func() { _, _ = out.ReadFrom(p.Stdout()); close(done) }()
	go func() { _, _ = bytes.NewBuffer(nil).ReadFrom(p.Stderr()) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the command did not end: Start did not close its stdin after the request's")
	}
	st, err := p.Wait(ctx(t))
	if err != nil || st.ExitCode != 0 || out.String() != "fed\ndone\n" {
		t.Fatalf("exit %d, err %v, stdout %q; want 0 and the fed line", st.ExitCode, err, out.String())
	}
}

func testPolicyCeilings(t *testing.T, s *suite) {
	_, sess := s.session(t, func(sp *sandbox.Spec) {
		// What is tested is the request against the policy, not how the
		// backend kills a tree (testTimeoutKillsTree does): a backend that
		// cannot kill whole trees still kills the command.
		sp.AllowWeaker = true
		sp.Policy.Resources.ExecTimeout = 500 * time.Millisecond
		sp.Policy.Resources.OutputBytes = 100
	})
	start := time.Now()
	res, err := sandbox.Exec(ctx(t), sess, sandbox.ExecRequest{
		Cmd:       []string{"sh", "-c", "head -c 1000 /dev/zero | tr '\\0' x; sleep 30; echo survived"},
		Timeout:   time.Minute,
		MaxOutput: 1 << 20,
	})
	if err != nil && !errors.Is(err, sandbox.ErrTimeout) {
		t.Fatalf("exec: %v", err)
	}
	if !res.TimedOut || time.Since(start) > 10*time.Second || strings.Contains(string(res.Stdout), "survived") {
		t.Fatalf("a request for a minute outlived the policy's 500ms: timed out %v after %v, stdout %q", res.TimedOut, time.Since(start), res.Stdout)
	}
	if len(res.Stdout) != 100 || !res.OutputTruncated {
		t.Fatalf("a request for 1 MiB of output got %d bytes (truncated %v); the policy's cap is 100", len(res.Stdout), res.OutputTruncated)
	}
	found := false
	for _, v := range res.Violations {
		found = found || v == sandbox.ExecTimeoutViolation(500*time.Millisecond)
	}
	if !found {
		t.Fatalf("violations %q lack the exec timeout's line", res.Violations)
	}
	// Lower is fine.
	res, err = sandbox.Exec(ctx(t), sess, sandbox.ExecRequest{Cmd: []string{"sh", "-c", "echo 0123456789"}, MaxOutput: 4})
	if err != nil || string(res.Stdout) != "0123" || !res.OutputTruncated {
		t.Fatalf("a request lowering the cap to 4: stdout %q, truncated %v, err %v", res.Stdout, res.OutputTruncated, err)
	}
}

// testLateReader: output read only after the command filled every buffer
// (and blocked) arrives whole, in order, and then the exit.
func testLateReader(t *testing.T, s *suite) {
	_, sess := s.session(t)
	const n = 400000 // about 2.7 MB of lines
	p, err := sess.Start(ctx(t), sandbox.ExecRequest{Cmd: []string{"seq", "1", strconv.Itoa(n)}, Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	go func() { _, _ = io.Copy(io.Discard, p.Stderr()) }()
	time.Sleep(time.Second)
	var out bytes.Buffer
	if _, err := io.Copy(&out, p.Stdout()); err != nil {
		t.Fatalf("read stdout: %v", err)
	}
	st, err := p.Wait(ctx(t))
	if err != nil || st.ExitCode != 0 {
		t.Fatalf("exit %+v, %v", st, err)
	}
	var want bytes.Buffer
	for i := 1; i <= n; i++ {
		want.WriteString(strconv.Itoa(i))
		want.WriteByte('\n')
	}
	if !bytes.Equal(out.Bytes(), want.Bytes()) {
		i := 0
		for i < min(out.Len(), want.Len()) && out.Bytes()[i] == want.Bytes()[i] {
			i++
		}
		t.Fatalf("got %d bytes, want %d; they differ from byte %d", out.Len(), want.Len(), i)
	}
}

func testProcessClose(t *testing.T, s *suite) {
	_, sess := s.session(t)
	p, err := sess.Start(ctx(t), sandbox.ExecRequest{Cmd: []string{"sh", "-c", "sleep 1; echo alive > closed-marker"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("a second close: %v", err)
	}
	time.Sleep(2 * time.Second)
	if res := sh(t, sess, "cat closed-marker"); res.ExitCode == 0 {
		t.Fatalf("the command outlived its closed process and wrote %q", res.Stdout)
	}
}
