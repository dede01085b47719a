//go:build linux

package seccomp

import (
	"slices"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/testenv"
	"golang.org/x/sys/unix"
)

// TestTheTableOfThisArchitectureHasTheNumbersGoUses cross-checks the
// generated table against the constants x/sys compiles in for the host.
func TestTheTableOfThisArchitectureHasTheNumbersGoUses(t *testing.T) {
	a, err := nativeArch()
	if err != nil {
		testenv.Skipf(t, "%v", err)
	}
	for name, nr := range map[string]uint32{
		"read": unix.SYS_READ, "openat": unix.SYS_OPENAT, "ioctl": unix.SYS_IOCTL, "clone": unix.SYS_CLONE,
		"clone3": unix.SYS_CLONE3, "ptrace": unix.SYS_PTRACE, "newfstatat": unix.SYS_NEWFSTATAT,
		"file_setattr": unix.SYS_FILE_SETATTR,
	} {
		if got, ok := a.calls.lookup(name); !ok || got != nr {
			t.Errorf("%s: table has %d (present %v), x/sys has %d", name, got, ok, nr)
		}
	}
}

func TestARuleNamingAnUnknownCallFailsBothForms(t *testing.T) {
	a := arches[0]
	a.calls = slices.DeleteFunc(slices.Clone(a.calls), func(c syscallNr) bool { return c.name == "ptrace" })
	if _, err := a.filter(); err == nil || !strings.Contains(err.Error(), `"ptrace"`) {
		t.Errorf("filter error = %v, want one naming ptrace", err)
	}
	if _, err := a.profile(nil); err == nil || !strings.Contains(err.Error(), `"ptrace"`) {
		t.Errorf("profile error = %v, want one naming ptrace", err)
	}
}

func TestTheTablesAreSortedByNameForLookup(t *testing.T) {
	for _, a := range arches {
		if !slices.IsSortedFunc(a.calls, func(x, y syscallNr) int { return strings.Compare(x.name, y.name) }) {
			t.Errorf("the %s table is not sorted by name", a.goarch)
		}
	}
}
