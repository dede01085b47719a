package main

import (
	"bytes"
	"io"
	"os/exec"
	"strings"
	"testing"

	"github.com/creack/pty"
)

// TestACommandsEscapeSequencesAreShownNotObeyed: a command that did not
// ask for a terminal writes an OSC 52 clipboard sequence; on the caller's
// terminal it arrives as text, and --raw passes it as it is.
func TestACommandsEscapeSequencesAreShownNotObeyed(t *testing.T) {
	requireLinuxSandbox(t)
	bin := agentboxBinary(t)
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		ptmx, tty, err := pty.Open()
		if err != nil {
			t.Fatal(err)
		}
		defer ptmx.Close()
		cmd.Stdout, cmd.Stderr = tty, tty
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		tty.Close()
		var out bytes.Buffer
		_, _ = io.Copy(&out, ptmx) // EIO once the command is gone
		_ = cmd.Wait()
		return out.String()
	}
	seq := `printf '\033]52;c;ZXZpbA==\007done\n'`
	if got := run("exec", "--", "sh", "-c", seq); strings.Contains(got, "\x1b]52") || !strings.Contains(got, "^[]52;c;ZXZpbA==^G") {
		t.Errorf("on a terminal the sequence reached it as %q; want it shown as ^[...", got)
	}
	if got := run("exec", "--raw", "--", "sh", "-c", seq); !strings.Contains(got, "\x1b]52") {
		t.Errorf("with --raw the sequence arrived as %q; want it as it is", got)
	}
}
