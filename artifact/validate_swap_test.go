package artifact

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentbox/agentbox/sandbox"
)

// swappingSession stands for a session in which a process the agent left
// running (Session.Start) swaps a candidate's content for a passing one
// while a validate command runs, and back before the re-hash.
type swappingSession struct {
	hostSession
	file, good, bad string
}

func (s *swappingSession) Start(ctx context.Context, req sandbox.ExecRequest) (sandbox.Process, error) {
	if err := os.WriteFile(s.file, []byte(s.good), 0o644); err != nil {
		return nil, err
	}
	p, err := s.hostSession.Start(ctx, req)
	if err != nil {
		return nil, err
	}
	return swapBack{p, s}, nil
}

// swapBack puts the failing content back once the command has ended.
type swapBack struct {
	sandbox.Process
	s *swappingSession
}

func (b swapBack) Wait(ctx context.Context) (sandbox.ExitStatus, error) {
	defer os.WriteFile(b.s.file, []byte(b.s.bad), 0o644)
	return b.Process.Wait(ctx)
}

// TestAValidateCommandJudgesTheBytesThatArePromoted: the validate command
// runs on the workspace file inside the sandbox, which the agent still
// controls; swapping it for a passing version only while the command runs
// passes the check and the re-hash, and the failing bytes are promoted.
func TestAValidateCommandJudgesTheBytesThatArePromoted(t *testing.T) {
	t.Skip("KNOWN ISSUE: validate runs on the live workspace file; a swap restored before the re-hash promotes bytes the command never saw (needs validation of the staged copy in a fresh session)")
	ws := workspace(t, map[string]string{"out/report.md": "no total here\n"})
	s := &swappingSession{hostSession: hostSession{dir: ws}, file: filepath.Join(ws, "out/report.md"), good: "Total: 42\n", bad: "no total here\n"}
	rules := &Rules{Outputs: []Output{{Glob: "out/*.md", Validate: `grep -q Total "$1"`}}}
	dest := filepath.Join(t.TempDir(), "d")
	src, err := NewDirSource(ws)
	must(t, err)
	_, err = Promote(context.Background(), src, rules, dest, PromoteOptions{Session: s})
	if err == nil {
		b, _ := os.ReadFile(filepath.Join(dest, "out/report.md"))
		t.Fatalf("Promote passed the validate command and promoted %q, which the command rejects", b)
	}
}
