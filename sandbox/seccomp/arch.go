//go:build linux

package seccomp

import (
	"fmt"
	"runtime"

	"github.com/agentbox/agentbox/sandbox"
	"golang.org/x/sys/unix"
)

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
	// calls are the system calls (zsyscalls.go).
	calls syscallTable
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

// knownAnywhere says whether some architecture's table names the call.
func knownAnywhere(name string) bool {
	for i := range arches {
		if _, ok := arches[i].calls.lookup(name); ok {
			return true
		}
	}
	return false
}

// nativeArch is the architecture agentbox runs on.
func nativeArch() (*arch, error) { return lookupArch(runtime.GOARCH) }

// nr is the number of a call the policy names; callers validate first.
func (a *arch) nr(name string) uint32 {
	nr, _ := a.calls.lookup(name)
	return nr
}

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
	var missing string
	check := func(name string) {
		if _, ok := a.calls.lookup(name); !ok && missing == "" {
			missing = name
		}
	}
	check(newestReviewed)
	check("ioctl")
	check("personality")
	for _, d := range deniedCalls {
		if a.has(d.only) {
			check(d.name)
		}
	}
	for _, r := range setIDModeRules {
		if a.has(r.only) {
			check(r.name)
		}
	}
	for _, r := range namespaceRules {
		check(r.name)
	}
	for _, c := range enosysCalls {
		check(c.name)
		check(c.fallback)
	}
	if missing != "" {
		return fmt.Errorf("seccomp: the policy names %q, which is not a %s system call", missing, a.goarch)
	}
	return nil
}
