//go:build linux

package seccomp

import (
	"encoding/json"
	"fmt"
	"slices"

	"golang.org/x/sys/unix"
)

// The profile is the policy in the JSON form that the Docker Engine's
// seccomp= security option reads (OCI runtimes read the same fields as
// config.json's linux.seccomp). It mirrors the native filter and is
// stricter in one way: it is an allow-list (default EPERM) of every system
// call of the architecture up to newestReviewed, minus the ones the policy
// refuses or decides by argument. So:
//
//   - deniedCalls fail with EPERM;
//   - clone and unshare are allowed only without namespace flags, and the
//     mode-taking calls only without the setuid and setgid bits;
//   - enosysCalls (clone3, openat2) fail with ENOSYS, so callers fall back
//     to the calls whose arguments are checked;
//   - personality is allowed only for PER_LINUX and the query;
//   - system calls newer than the reviewed one, and any name the engine's
//     libseccomp does not know, fail with EPERM (the native filter answers
//     ENOSYS for the newer ones; both refuse them);
//   - only the profile's architecture is accepted (libseccomp kills a
//     foreign one, x32 included, with its bad-arch action).
//
// One native rule is not carried over: the ioctl TIOCSTI/TIOCLINUX denial.
// Expressing "ioctl except these requests" in the engine's comparison
// language can be bypassed with high argument bits, and it is not needed
// there: an exec's terminal is a pty the engine allocates inside the
// container, never the user's terminal (agentbox relays bytes to it), so
// injected input can only reach the sandbox's own shell.

type profileArg struct {
	Index    uint   `json:"index"`
	Value    uint64 `json:"value"`
	ValueTwo uint64 `json:"valueTwo"`
	Op       string `json:"op"`
}

type profileRule struct {
	Names    []string     `json:"names"`
	Action   string       `json:"action"`
	ErrnoRet *uint        `json:"errnoRet,omitempty"`
	Args     []profileArg `json:"args,omitempty"`
}

type profileJSON struct {
	DefaultAction string        `json:"defaultAction"`
	Architectures []string      `json:"architectures"`
	Syscalls      []profileRule `json:"syscalls"`
}

// Profile returns the policy as a seccomp profile (JSON) for the linux
// architecture goarch, which is the container engine's, not necessarily
// agentbox's, with the calls enosysToo refused as well (ENOSYS, which
// callers take for "not here"); a call the architecture lacks is left
// out. It is rebuilt on each call.
func Profile(goarch string, enosysToo ...string) ([]byte, error) {
	a, err := lookupArch(goarch)
	if err != nil {
		return nil, err
	}
	// A call some architecture lacks (inotify_init on arm64) needs no
	// rule there; one no table knows is a caller's typo.
	var present []string
	for _, name := range enosysToo {
		if _, ok := a.calls.lookup(name); ok {
			present = append(present, name)
		} else if !knownAnywhere(name) {
			return nil, fmt.Errorf("seccomp: no system call %q on any architecture", name)
		}
	}
	prof, err := a.profile(present)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(prof)
	if err != nil {
		return nil, fmt.Errorf("seccomp: encode the %s profile: %w", goarch, err)
	}
	return b, nil
}

// profile compiles the policy to a profile for a.
func (a *arch) profile(enosysToo []string) (profileJSON, error) {
	if err := a.validate(); err != nil {
		return profileJSON{}, err
	}
	// decided is every call the unconditional allow-list leaves out:
	// refused outright, or decided by a rule below.
	decided := map[string]bool{}
	for _, d := range a.denied() {
		decided[d.name] = true
	}
	var rules []profileRule
	allowWithout := func(name string, arg, bits uint32) {
		decided[name] = true
		rules = append(rules, profileRule{Names: []string{name}, Action: "SCMP_ACT_ALLOW",
			Args: []profileArg{{Index: uint(arg), Value: uint64(bits), ValueTwo: 0, Op: "SCMP_CMP_MASKED_EQ"}}})
	}
	for _, r := range namespaceRules {
		allowWithout(r.name, r.arg, r.flags)
	}
	for _, r := range a.modeRules() {
		allowWithout(r.name, r.arg, setIDBits)
	}
	decided["personality"] = true
	for _, v := range allowedPersonalities {
		rules = append(rules, profileRule{Names: []string{"personality"}, Action: "SCMP_ACT_ALLOW",
			Args: []profileArg{{Index: 0, Value: uint64(v), Op: "SCMP_CMP_EQ"}}})
	}
	enosys := uint(unix.ENOSYS)
	var enosysNames []string
	for _, c := range enosysCalls {
		decided[c.name] = true
		enosysNames = append(enosysNames, c.name)
	}
	for _, name := range enosysToo {
		decided[name] = true
		enosysNames = append(enosysNames, name)
	}
	rules = append(rules, profileRule{Names: enosysNames, Action: "SCMP_ACT_ERRNO", ErrnoRet: &enosys})

	newest := a.nr(newestReviewed)
	var allowed []string
	for _, c := range a.calls {
		if c.nr <= newest && !decided[c.name] {
			allowed = append(allowed, c.name)
		}
	}
	slices.Sort(allowed)
	return profileJSON{
		DefaultAction: "SCMP_ACT_ERRNO",
		Architectures: []string{a.scmp},
		Syscalls:      append([]profileRule{{Names: allowed, Action: "SCMP_ACT_ALLOW"}}, rules...),
	}, nil
}
