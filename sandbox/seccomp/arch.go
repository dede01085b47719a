//go:build linux

package seccomp

import (
	"fmt"
	"runtime"

	"github.com/agentbox/agentbox/sandbox"
	"golang.org/x/sys/unix"
)

// The system-call tables in zsyscalls.go come from the zsysnum_linux_*.go
// files of the golang.org/x/sys version in go.mod; gensyscalls' test fails
// when they differ from what it writes now.
//go:generate go run ./internal/gensyscalls -o zsyscalls.go

// arch is a system-call ABI the policy is compiled for. Both forms can be
// built for any of them on any host: the Docker profile is for the
// engine's architecture, which need not be agentbox's.
type arch struct {
	goarch string
	// audit is the AUDIT_ARCH value of native calls in seccomp_data. The
	// filter kills a caller from another ABI (i386 through int 0x80 on
	// x86_64, a 32-bit arm task on arm64), whose numbers differ.
	audit uint32
	// scmp is libseccomp's name for the architecture, for the profile.
	scmp string
	// x32 says that x32-ABI calls share audit and differ only by x32Bit;
	// the filter refuses them by number.
	x32 bool
	// calls are the system calls by name (zsyscalls.go).
	calls map[string]uint32
}

// x32Bit marks x32-ABI system calls on x86_64.
const x32Bit = 0x40000000

var arches = []arch{
	{goarch: "amd64", audit: unix.AUDIT_ARCH_X86_64, scmp: "SCMP_ARCH_X86_64", x32: true, calls: amd64Syscalls},
	{goarch: "arm64", audit: unix.AUDIT_ARCH_AARCH64, scmp: "SCMP_ARCH_AARCH64", calls: arm64Syscalls},
}

// lookupArch returns the architecture named by goarch. Elsewhere there is
// no policy and a backend must refuse the identity policy part.
func lookupArch(goarch string) (*arch, error) {
	for i := range arches {
		if arches[i].goarch == goarch {
			return &arches[i], nil
		}
	}
	return nil, sandbox.Errorf(sandbox.ErrPolicyUnsupported, "seccomp: no policy for architecture %s (only amd64 and arm64)", goarch)
}

// nativeArch is the architecture agentbox runs on.
func nativeArch() (*arch, error) { return lookupArch(runtime.GOARCH) }

// has says whether a rule marked only for one architecture ("" for all)
// applies to a.
func (a *arch) has(only string) bool { return only == "" || only == a.goarch }

// denied is the outright denials that apply to a.
func (a *arch) denied() []deniedCall {
	var out []deniedCall
	for _, d := range deniedCalls {
		if a.has(d.only) {
			out = append(out, d)
		}
	}
	return out
}

// modeRules is the setuid/setgid mode rules that apply to a.
func (a *arch) modeRules() []modeRule {
	var out []modeRule
	for _, r := range setIDModeRules {
		if a.has(r.only) {
			out = append(out, r)
		}
	}
	return out
}

// validate checks that every call the policy names for a is in a's table,
// so that a misspelt or misplaced name fails the build of both forms
// instead of dropping a rule.
func (a *arch) validate() error {
	names := []string{newestReviewed, "ioctl", "personality"}
	for _, d := range a.denied() {
		names = append(names, d.name)
	}
	for _, r := range a.modeRules() {
		names = append(names, r.name)
	}
	for _, r := range namespaceRules {
		names = append(names, r.name)
	}
	for _, c := range enosysCalls {
		names = append(names, c.name, c.fallback)
	}
	for _, name := range names {
		if _, ok := a.calls[name]; !ok {
			return fmt.Errorf("seccomp: the policy names %q, which is not a %s system call", name, a.goarch)
		}
	}
	return nil
}
