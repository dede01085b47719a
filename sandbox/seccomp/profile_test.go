//go:build linux

package seccomp

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/agentbox/agentbox/sandbox"
)

// decodeProfile returns the profile for goarch as the engine reads it.
func decodeProfile(t *testing.T, goarch string, enosysToo ...string) profileJSON {
	t.Helper()
	text, err := Profile(goarch, enosysToo...)
	if err != nil {
		t.Fatal(err)
	}
	var prof profileJSON
	if err := json.Unmarshal(text, &prof); err != nil {
		t.Fatal(err)
	}
	return prof
}

func TestTheAmd64ProfileIsAnAllowListWithoutTheNativeDenials(t *testing.T) {
	prof := decodeProfile(t, "amd64")
	if !slices.Equal(prof.Architectures, []string{"SCMP_ARCH_X86_64"}) {
		t.Errorf("architectures %v, want x86_64 only", prof.Architectures)
	}
	if prof.DefaultAction != "SCMP_ACT_ERRNO" {
		t.Fatalf("default action %s, want SCMP_ACT_ERRNO (an allow-list)", prof.DefaultAction)
	}
	allowed := prof.Syscalls[0].Names
	cases := []struct {
		name    string
		allowed bool
	}{
		{"read", true}, {"execve", true}, {"openat2", false}, {"openat", false}, {"fchmodat", false}, {"chmod", false}, {"ptrace", false}, {"mount", false},
		{"bpf", false}, {"io_uring_setup", false}, {"keyctl", false}, {"setns", false},
		{"kexec_load", false}, {"clone", false}, {"unshare", false}, {"listns", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := slices.Contains(allowed, tc.name); got != tc.allowed {
				t.Fatalf("%s unconditionally allowed = %v, want %v", tc.name, got, tc.allowed)
			}
		})
	}
	var cloneRule bool
	for _, r := range prof.Syscalls[1:] {
		if slices.Equal(r.Names, []string{"clone"}) && r.Action == "SCMP_ACT_ALLOW" && len(r.Args) == 1 && r.Args[0].Op == "SCMP_CMP_MASKED_EQ" && r.Args[0].ValueTwo == 0 {
			cloneRule = true
		}
	}
	if !cloneRule {
		t.Fatal("no rule allowing clone only without namespace flags")
	}
	// Calls that take a mode are allowed only without setuid/setgid bits.
	for _, name := range []string{"chmod", "fchmod", "fchmodat", "fchmodat2", "open", "openat", "creat", "mknod", "mknodat"} {
		var ok bool
		for _, r := range prof.Syscalls[1:] {
			if slices.Equal(r.Names, []string{name}) && r.Action == "SCMP_ACT_ALLOW" && len(r.Args) == 1 &&
				r.Args[0].Op == "SCMP_CMP_MASKED_EQ" && r.Args[0].Value == 0o6000 && r.Args[0].ValueTwo == 0 {
				ok = true
			}
		}
		if !ok {
			t.Errorf("no rule allowing %s only without the setuid and setgid bits", name)
		}
	}
}

func TestTheArm64ProfileNamesArm64Calls(t *testing.T) {
	prof := decodeProfile(t, "arm64")
	if !slices.Equal(prof.Architectures, []string{"SCMP_ARCH_AARCH64"}) {
		t.Errorf("architectures %v, want aarch64 only", prof.Architectures)
	}
	allowed := prof.Syscalls[0].Names
	for _, name := range []string{"read", "newfstatat", "execve", "renameat2"} {
		if !slices.Contains(allowed, name) {
			t.Errorf("%s is not allowed on arm64", name)
		}
	}
	for _, name := range []string{"ptrace", "mount", "openat", "open", "iopl"} {
		if slices.Contains(allowed, name) {
			t.Errorf("%s is unconditionally allowed on arm64", name)
		}
	}
}

func TestThereIsNoProfileForAnArchitectureWithoutATable(t *testing.T) {
	if _, err := Profile("riscv64"); !errors.Is(err, sandbox.ErrPolicyUnsupported) {
		t.Errorf("Profile(riscv64) error = %v, want ErrPolicyUnsupported", err)
	}
}

func TestEnosysCallsFailWithENOSYSAndAreNotAllowed(t *testing.T) {
	calls := []string{"inotify_init", "inotify_init1"}
	prof := decodeProfile(t, "amd64", calls...)
	var enosys bool
	for _, r := range prof.Syscalls {
		for _, name := range calls {
			if slices.Contains(r.Names, name) && r.Action == "SCMP_ACT_ALLOW" {
				t.Errorf("%s is allowed by a rule of the profile", name)
			}
		}
		if r.Action == "SCMP_ACT_ERRNO" && r.ErrnoRet != nil && *r.ErrnoRet == 38 &&
			slices.Contains(r.Names, calls[0]) && slices.Contains(r.Names, calls[1]) {
			enosys = true
		}
	}
	if !enosys {
		t.Error("no rule making inotify_init and inotify_init1 fail with ENOSYS")
	}
}

func TestEnosysCallsAbsentFromAnArchitectureAreLeftOut(t *testing.T) {
	prof := decodeProfile(t, "arm64", "inotify_init", "inotify_init1")
	for _, r := range prof.Syscalls {
		if slices.Contains(r.Names, "inotify_init") {
			t.Errorf("arm64 profile names inotify_init, which arm64 lacks: %+v", r)
		}
	}
	if _, err := Profile("amd64", "inotify_inti"); err == nil {
		t.Error("Profile accepted a call no architecture has")
	}
}
