package docker

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/agentbox/agentbox/internal/testenv"
)

func TestTheSeccompProfileIsAnAllowListWithoutTheNativeDenials(t *testing.T) {
	text, err := buildSeccompProfile(false)
	if err != nil {
		testenv.Skipf(t, "no profile on this architecture: %v", err)
	}
	var prof seccompJSON
	if err := json.Unmarshal([]byte(text), &prof); err != nil {
		t.Fatal(err)
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

func TestTheRootSessionProfileGivesNoInotifyInstance(t *testing.T) {
	text, err := buildSeccompProfile(true)
	if err != nil {
		testenv.Skipf(t, "no profile on this architecture: %v", err)
	}
	var prof seccompJSON
	if err := json.Unmarshal([]byte(text), &prof); err != nil {
		t.Fatal(err)
	}
	var enosys bool
	for _, r := range prof.Syscalls {
		for _, name := range hostCounted {
			if slices.Contains(r.Names, name) && r.Action == "SCMP_ACT_ALLOW" {
				t.Errorf("%s is allowed by a rule of the root profile", name)
			}
		}
		if slices.Equal(r.Names, hostCounted) && r.Action == "SCMP_ACT_ERRNO" && r.ErrnoRet != nil && *r.ErrnoRet == 38 {
			enosys = true
		}
	}
	if !enosys {
		t.Error("no rule making inotify_init and inotify_init1 fail with ENOSYS")
	}
}
