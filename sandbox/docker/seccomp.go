package docker

import (
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/linux/seccomp"
)

// The Docker seccomp profile mirrors the native filter (sandbox/linux/seccomp)
// in the engine's JSON form, and is stricter in one way: it is an
// allow-list (default EPERM) of every x86_64 system call up to the newest
// one the native filter reviewed, minus the ones it denies. So:
//
//   - the native denials (ptrace, mount and the new mount API, setns, bpf,
//     keyrings, kexec, modules, userfaultfd, io_uring, perf, clock and
//     reboot control, ...) fail with EPERM;
//   - clone and unshare are allowed only without namespace flags, clone3
//     fails with ENOSYS so libc falls back to clone;
//   - personality is allowed only for PER_LINUX and the query;
//   - system calls newer than the reviewed one, and any name the engine's
//     libseccomp does not know, fail with EPERM;
//   - only the native architecture is accepted (libseccomp kills a foreign
//     one, x32 included, with its bad-arch action).
//
// One native rule is not carried over: the ioctl TIOCSTI/TIOCLINUX denial.
// Expressing "ioctl except these requests" in the engine's comparison
// language can be bypassed with high argument bits, and it is not needed
// here: an exec's terminal is a pty the engine allocates inside the
// container, never the user's terminal (agentbox relays bytes to it), so
// injected input can only reach the sandbox's own shell.

// newestReviewed mirrors the native filter's maxReviewed.
const newestReviewed = unix.SYS_FILE_SETATTR

type seccompArg struct {
	Index    uint   `json:"index"`
	Value    uint64 `json:"value"`
	ValueTwo uint64 `json:"valueTwo"`
	Op       string `json:"op"`
}

type seccompRule struct {
	Names    []string     `json:"names"`
	Action   string       `json:"action"`
	ErrnoRet *uint        `json:"errnoRet,omitempty"`
	Args     []seccompArg `json:"args,omitempty"`
}

type seccompJSON struct {
	DefaultAction string        `json:"defaultAction"`
	Architectures []string      `json:"architectures"`
	Syscalls      []seccompRule `json:"syscalls"`
}

var (
	profileOnce     sync.Once
	profileText     string
	profileErr      error
	rootProfileOnce sync.Once
	rootProfileText string
	rootProfileErr  error
)

// seccompProfile is the engine-ready JSON profile (built once).
func (c *Client) seccompProfile() (string, error) {
	profileOnce.Do(func() { profileText, profileErr = buildSeccompProfile(false) })
	return profileText, profileErr
}

// sessionProfile is the profile for a session whose commands run as who.
// One running as uid 0 (the owner of a root-owned workspace) is host uid
// 0, whose per-user kernel counts it would share with the host's root
// daemons; the one it could exhaust from inside in a few calls is
// inotify's (128 instances by default: systemd, dockerd and tail -f then
// get EMFILE), so such a session gets no inotify instance at all
// (inotify_init and inotify_init1 fail with ENOSYS; tools fall back to
// polling).
func (c *Client) sessionProfile(who identity) (string, error) {
	if who.uid != 0 {
		return c.seccompProfile()
	}
	rootProfileOnce.Do(func() { rootProfileText, rootProfileErr = buildSeccompProfile(true) })
	return rootProfileText, rootProfileErr
}

// hostCounted are the calls whose objects count against a per-user limit
// of the init user namespace that a root session could exhaust for host
// root (see sessionProfile).
var hostCounted = []string{"inotify_init", "inotify_init1"}

// nativeDenied is the set of system-call names the native filter denies
// outright: the entries of seccomp.Denied that are plain names (the
// others describe flag rules, mirrored below by hand).
func nativeDenied() map[string]bool {
	out := map[string]bool{}
	for _, d := range seccomp.Denied() {
		if !strings.ContainsAny(d, " ,()") {
			out[d] = true
		}
	}
	// Flag-filtered calls get their own rules.
	for _, n := range []string{"clone", "clone3", "unshare", "personality"} {
		out[n] = true
	}
	return out
}

func buildSeccompProfile(asRoot bool) (string, error) {
	if runtime.GOARCH != "amd64" || len(amd64Syscalls) == 0 {
		return "", sandbox.Errorf(sandbox.ErrPolicyUnsupported, "docker: no seccomp profile for %s (only amd64)", runtime.GOARCH)
	}
	denied := nativeDenied()
	if len(denied) < 20 {
		return "", fmt.Errorf("docker: the native seccomp deny list has only %d names; refusing to build a profile from it", len(denied))
	}
	// Calls that take a file mode are allowed only without the setuid and
	// setgid bits, as in the native filter: a file planted in the host
	// workspace bind would otherwise keep them on the host.
	modeArgs := seccomp.SetIDModeArgs()
	var allowed []string
	for name, nr := range amd64Syscalls {
		if _, byMode := modeArgs[name]; nr <= newestReviewed && !denied[name] && !byMode && name != "openat2" && !(asRoot && slices.Contains(hostCounted, name)) {
			allowed = append(allowed, name)
		}
	}
	slices.Sort(allowed)
	const ns = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
		unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET
	enosys := uint(unix.ENOSYS)
	prof := seccompJSON{
		DefaultAction: "SCMP_ACT_ERRNO",
		Architectures: []string{"SCMP_ARCH_X86_64"},
		Syscalls: []seccompRule{
			{Names: allowed, Action: "SCMP_ACT_ALLOW"},
			{Names: []string{"clone"}, Action: "SCMP_ACT_ALLOW", Args: []seccompArg{{Index: 0, Value: ns, ValueTwo: 0, Op: "SCMP_CMP_MASKED_EQ"}}},
			{Names: []string{"unshare"}, Action: "SCMP_ACT_ALLOW", Args: []seccompArg{{Index: 0, Value: ns | unix.CLONE_NEWTIME, ValueTwo: 0, Op: "SCMP_CMP_MASKED_EQ"}}},
			{Names: []string{"clone3"}, Action: "SCMP_ACT_ERRNO", ErrnoRet: &enosys},
			{Names: []string{"personality"}, Action: "SCMP_ACT_ALLOW", Args: []seccompArg{{Index: 0, Value: 0, Op: "SCMP_CMP_EQ"}}},
			{Names: []string{"personality"}, Action: "SCMP_ACT_ALLOW", Args: []seccompArg{{Index: 0, Value: 0xffffffff, Op: "SCMP_CMP_EQ"}}},
		},
	}
	modeNames := make([]string, 0, len(modeArgs))
	for name := range modeArgs {
		modeNames = append(modeNames, name)
	}
	slices.Sort(modeNames)
	for _, name := range modeNames {
		prof.Syscalls = append(prof.Syscalls, seccompRule{Names: []string{name}, Action: "SCMP_ACT_ALLOW",
			Args: []seccompArg{{Index: uint(modeArgs[name]), Value: unix.S_ISUID | unix.S_ISGID, ValueTwo: 0, Op: "SCMP_CMP_MASKED_EQ"}}})
	}
	// openat2's mode is in a struct seccomp cannot read: ENOSYS, so
	// callers fall back to openat.
	prof.Syscalls = append(prof.Syscalls, seccompRule{Names: []string{"openat2"}, Action: "SCMP_ACT_ERRNO", ErrnoRet: &enosys})
	if asRoot {
		prof.Syscalls = append(prof.Syscalls, seccompRule{Names: hostCounted, Action: "SCMP_ACT_ERRNO", ErrnoRet: &enosys})
	}
	b, err := json.Marshal(prof)
	if err != nil {
		return "", fmt.Errorf("docker: encode seccomp profile: %w", err)
	}
	return string(b), nil
}
