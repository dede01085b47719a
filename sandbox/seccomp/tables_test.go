//go:build linux

package seccomp

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// TestTheTableOfThisArchitectureHasTheNumbersGoUses cross-checks the
// generated table against the constants x/sys compiles in for the host.
func TestTheTableOfThisArchitectureHasTheNumbersGoUses(t *testing.T) {
	table := map[string]map[string]uint32{"amd64": amd64Syscalls, "arm64": arm64Syscalls}[runtime.GOARCH]
	if table == nil {
		t.Skipf("no table for %s", runtime.GOARCH)
	}
	for name, nr := range map[string]uint32{
		"read": unix.SYS_READ, "openat": unix.SYS_OPENAT, "ioctl": unix.SYS_IOCTL, "clone": unix.SYS_CLONE,
		"clone3": unix.SYS_CLONE3, "ptrace": unix.SYS_PTRACE, "newfstatat": unix.SYS_NEWFSTATAT,
		"file_setattr": unix.SYS_FILE_SETATTR,
	} {
		if got, ok := table[name]; !ok || got != nr {
			t.Errorf("%s: table has %d (present %v), x/sys has %d", name, got, ok, nr)
		}
	}
}
