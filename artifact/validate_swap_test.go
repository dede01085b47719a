package artifact

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/sandbox"
)

// swapping stands for a process the agent left running in its session
// (Session.Start): while a validate command runs, it swaps the
// candidate in the agent's workspace for a passing version, and swaps it
// back before the command ends, so that a re-hash of the workspace file
// afterwards finds the bytes hashed before.
type swapping struct {
	sandbox.Session // where the validate command runs
	file, good, bad string
}

func (s *swapping) Start(ctx context.Context, req sandbox.ExecRequest) (sandbox.Process, error) {
	if err := os.WriteFile(s.file, []byte(s.good), 0o644); err != nil {
		return nil, err
	}
	p, err := s.Session.Start(ctx, req)
	if err != nil {
		return nil, err
	}
	return swapBack{p, s}, nil
}

// swapBack puts the failing content back once the command has ended.
type swapBack struct {
	sandbox.Process
	s *swapping
}

func (b swapBack) Wait(ctx context.Context) (sandbox.ExitStatus, error) {
	defer os.WriteFile(b.s.file, []byte(b.s.bad), 0o644)
	return b.Process.Wait(ctx)
}

// TestAValidateCommandJudgesTheBytesThatArePromoted: the validate command
// runs on the staged copy in a fresh session, which the agent does not
// control, so swapping the workspace file for a passing version while
// the command runs changes nothing: the failing bytes are judged, and
// refused. (Run on the live workspace file, as validate once was, the
// swap passed both the command and the re-hash.)
func TestAValidateCommandJudgesTheBytesThatArePromoted(t *testing.T) {
	const bad = "no total here\n"
	ws := workspace(t, map[string]string{"out/report.md": bad})
	agentFile := filepath.Join(ws, "out/report.md")
	fresh := &freshSessions{t: t, prepare: func(h *hostSession) sandbox.Session {
		return &swapping{Session: h, file: agentFile, good: "Total: 42\n", bad: bad}
	}}
	rules := &Rules{Outputs: []Output{{Glob: "out/*.md", Validate: `grep -q Total "$1"`}}}
	dest := filepath.Join(t.TempDir(), "d")
	src, err := NewDirSource(ws)
	must(t, err)
	_, err = Promote(context.Background(), src, rules, dest, PromoteOptions{NewSession: fresh.new})
	if err == nil {
		b, _ := os.ReadFile(filepath.Join(dest, "out/report.md"))
		t.Fatalf("Promote passed the validate command and promoted %q, which the command rejects", b)
	}
	if !strings.Contains(err.Error(), `"grep -q Total \"$1\"" exited 1`) {
		t.Fatalf("Promote = %v, want the validate command to refuse out/report.md", err)
	}
	if len(fresh.made) != 1 || fresh.made[0].execs != 1 {
		t.Fatalf("want the command run once in one fresh session")
	}
}
