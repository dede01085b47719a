package linux

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/sandbox"
)

func TestATerminalCommandHasANamedTerminalInsideTheSandbox(t *testing.T) {
	c := newTestClient(t)
	s := newTestSession(t, c, sandbox.Spec{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, err := s.Start(ctx, sandbox.ExecRequest{Cmd: []string{"sh", "-c", "tty; ls -l /dev/pts"}, TTY: true})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(p.Stdout())
	st, err := p.Wait(ctx)
	if err != nil || st.ExitCode != 0 {
		t.Fatalf("tty: %+v, %v; output %q", st, err, out)
	}
	first, _, _ := strings.Cut(strings.ReplaceAll(string(out), "\r", ""), "\n")
	if !strings.HasPrefix(first, "/dev/pts/") {
		t.Fatalf("tty inside the sandbox printed %q, want a /dev/pts name; output:\n%s", first, out)
	}
}
