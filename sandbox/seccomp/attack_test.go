//go:build linux

package seccomp

import (
	"fmt"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/testenv"
	"golang.org/x/sys/unix"
)

// These tests try the attacks on real targets rather than with harmless
// arguments.

func TestPtraceAttachToASiblingAndTIOCSTIIntoARealTerminalFail(t *testing.T) {
	out := child(t, "attacks", true)
	for _, want := range []string{
		fmt.Sprintf("ptrace-attach=%d\n", unix.EPERM),
		fmt.Sprintf("tiocsti=%d\n", unix.EPERM),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("child reported %q, want a line %q", out, want)
		}
	}
}

func TestNamespaceAndMountToolsFailUnderTheFilter(t *testing.T) {
	tests := []struct {
		name string
		argv []string
	}{
		{"unshare -U cannot create a user namespace", []string{"unshare", "-U", "true"}},
		{"unshare -r cannot map root in a new user namespace", []string{"unshare", "-r", "true"}},
		{"unshare -n cannot create a network namespace", []string{"unshare", "-n", "true"}},
		{"unshare -m cannot create a mount namespace", []string{"unshare", "-m", "true"}},
		{"mount cannot mount a tmpfs", []string{"mount", "-t", "tmpfs", "none", "/mnt"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			testenv.NeedCommand(t, tt.argv[0])
			out, code := childExit(t, "exec", tt.argv...)
			if code == 0 {
				t.Fatalf("%v succeeded under the filter: %s", tt.argv, out)
			}
			if !strings.Contains(strings.ToLower(out), "operation not permitted") && !strings.Contains(out, "permission denied") {
				t.Errorf("%v failed (exit %d) without EPERM: %s", tt.argv, code, out)
			}
		})
	}
}
