// Package attacktest runs the escape tests' attack helper in a session of any
// backend and reads what it reports. The helper (testdata/attack, a small
// static Go program) tries one attack per invocation through the raw
// system call where shell tools cannot reach it, and its last line says
// whether the attack worked ("result: ok") or which errno stopped it; see
// its package comment. sandbox/linux/escapetest attacks the native backend
// with it, sandbox/kube's tests a Pod.
package attacktest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/sandbox"
)

// helperPackage is the helper's import path.
const helperPackage = "github.com/agentbox/agentbox/internal/attacktest/testdata/attack"

// Build compiles the helper as a static binary (CGO_ENABLED=0: it needs
// nothing in the sandbox) at out, for the architecture of this host.
func Build(out string) error {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("the go tool is needed to build the attack helper: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return fmt.Errorf("build the attack helper: %w", err)
	}
	cmd := exec.Command(goTool, "build", "-o", out, helperPackage)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build the attack helper with %s: %v\n%s", goTool, err, b)
	}
	return nil
}

// Binary is the helper built once per test binary, on first use, alone
// in a temporary directory of its own that any user may read (a backend
// may bind that directory into its sessions). The zero value is ready; a test binary's TestMain
// calls Remove after its tests.
type Binary struct {
	once sync.Once
	path string
	err  error
}

// Path builds the helper on the first call and returns its path, or why
// it could not be built.
func (b *Binary) Path() (string, error) {
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "agentbox-attack-")
		if err != nil {
			b.err = fmt.Errorf("build the attack helper: %w", err)
			return
		}
		// Any user may read the directory: a session's user runs the
		// helper where a backend binds it.
		if err := os.Chmod(dir, 0o755); err != nil {
			os.RemoveAll(dir)
			b.err = fmt.Errorf("build the attack helper: %w", err)
			return
		}
		b.path = filepath.Join(dir, "attack")
		if b.err = Build(b.path); b.err != nil {
			os.RemoveAll(dir)
		}
	})
	return b.path, b.err
}

// Remove deletes what Path built; a Path after it builds nothing.
func (b *Binary) Remove() error {
	b.once.Do(func() { b.err = errors.New("the attack helper was removed") })
	if b.path == "" || b.err != nil {
		return nil
	}
	b.err = errors.New("the attack helper was removed")
	if err := os.RemoveAll(filepath.Dir(b.path)); err != nil {
		return fmt.Errorf("remove the attack helper: %w", err)
	}
	return nil
}

// Outcome is one attack's report.
type Outcome struct {
	Args []string
	// Got is "ok" when the attack worked, else the name of the errno
	// that stopped it (or "error(...)").
	Got string
	// Out is the helper's whole report, detail lines included.
	Out string
}

// Failed asserts that the attack was stopped, with one of the errnos in
// want when any are given, and logs which.
func (o Outcome) Failed(t testing.TB, want ...string) {
	t.Helper()
	if o.Got == "ok" {
		t.Fatalf("ESCAPE: attack %q succeeded:\n%s", o.Args, o.Out)
	}
	if len(want) > 0 && !contains(want, o.Got) {
		t.Errorf("attack %q failed with %s, want %s (a different wall than expected stopped it):\n%s", o.Args, o.Got, strings.Join(want, " or "), o.Out)
	}
	t.Logf("stopped with %s", o.Got)
}

// Parse reads the report of one attack (args) from the helper's result.
func Parse(args []string, res sandbox.ExecResult) (Outcome, error) {
	out := string(res.Stdout)
	i := strings.LastIndex(out, "result: ")
	if res.ExitCode != 0 || i < 0 {
		return Outcome{}, fmt.Errorf("attack helper %q did not report (exit %d %s): stdout %q stderr %q", args, res.ExitCode, res.Signal, res.Stdout, res.Stderr)
	}
	return Outcome{Args: args, Got: strings.TrimSpace(out[i+len("result: "):]), Out: out}, nil
}

// Run runs one attack with the helper at helper in s and fails the test
// when the helper could not run or report.
func Run(t testing.TB, s sandbox.Session, helper string, args ...string) Outcome {
	t.Helper()
	o, err := Parse(args, Exec(t, s, sandbox.ExecRequest{Cmd: append([]string{helper}, args...)}))
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// Batch runs several attacks in one helper process (one exec instead of
// many) and returns each one's outcome, in order.
func Batch(t testing.TB, s sandbox.Session, helper string, list [][]string) []Outcome {
	t.Helper()
	args := []string{helper, "batch"}
	for _, a := range list {
		args = append(args, strings.Join(a, " "))
	}
	res := Exec(t, s, sandbox.ExecRequest{Cmd: args})
	parts := strings.Split(string(res.Stdout), "=== ")
	if res.ExitCode != 0 || len(parts) != len(list)+1 {
		t.Fatalf("attack batch did not report (exit %d %s): stdout %q stderr %q", res.ExitCode, res.Signal, res.Stdout, res.Stderr)
	}
	out := make([]Outcome, len(list))
	for i, p := range parts[1:] {
		_, body, _ := strings.Cut(p, "\n")
		j := strings.LastIndex(body, "result: ")
		if j < 0 {
			t.Fatalf("attack %q did not report: %q", list[i], body)
		}
		out[i] = Outcome{Args: list[i], Got: strings.TrimSpace(body[j+len("result: "):]), Out: body}
	}
	return out
}

// Exec runs req in s (with a timeout of 20 seconds when it sets none)
// and fails the test if it cannot be run at all.
func Exec(t testing.TB, s sandbox.Session, req sandbox.ExecRequest) sandbox.ExecResult {
	t.Helper()
	if req.Timeout == 0 {
		req.Timeout = 20 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), req.Timeout+10*time.Second)
	defer cancel()
	res, err := sandbox.Exec(ctx, s, req)
	if err != nil {
		t.Fatalf("exec %q: %v", req.Cmd, err)
	}
	return res
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
