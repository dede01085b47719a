//go:build linux

package seccomp

import (
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// Seccomp actions.
const (
	actAllow  = unix.SECCOMP_RET_ALLOW
	actEPERM  = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	actENOSYS = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
	// actKill ends the whole process (not only the thread), so a
	// multi-threaded program cannot keep running half-killed.
	actKill = unix.SECCOMP_RET_KILL_PROCESS
)

// Offsets into struct seccomp_data { int nr; u32 arch; u64 ip; u64 args[6]; }.
const (
	offNr   = 0
	offArch = 4
)

// offArgLow is the offset of the low 32 bits of argument i. Both supported
// architectures are little-endian.
func offArgLow(i uint32) uint32 { return 16 + 8*i }

// Filter returns the seccomp program for the architecture agentbox runs
// on, the one Install loads, for inspection and tests. It is rebuilt on
// each call; the result may be modified freely.
func Filter() ([]unix.SockFilter, error) {
	a, err := nativeArch()
	if err != nil {
		return nil, err
	}
	return a.filter()
}

// filter compiles the policy to classic BPF for a.
func (a *arch) filter() ([]unix.SockFilter, error) {
	if err := a.validate(); err != nil {
		return nil, err
	}
	nr := a.nr
	p := newProgram()

	// A syscall from another ABI has other numbers; a table for the native
	// ABI would let it through.
	p.load32(offArch)
	p.jump(unix.BPF_JEQ, a.audit, "", "kill")

	p.load32(offNr)
	if a.x32 {
		p.jump(unix.BPF_JGE, x32Bit, "eperm", "")
	}
	p.jump(unix.BPF_JGT, nr(newestReviewed), "enosys", "")

	// Calls decided by their arguments. ioctl is first because it is by
	// far the most frequent of them; calls that are always allowed do not
	// pay for this filter at all once the kernel's seccomp cache (5.11+)
	// has seen them.
	p.jump(unix.BPF_JEQ, nr("ioctl"), "ioctl", "")
	for _, r := range namespaceRules {
		p.jump(unix.BPF_JEQ, nr(r.name), r.name, "")
	}
	p.jump(unix.BPF_JEQ, nr("personality"), "personality", "")
	for _, c := range enosysCalls {
		p.jump(unix.BPF_JEQ, nr(c.name), "enosys", "")
	}
	modeArgs := map[uint32]bool{}
	for _, r := range a.modeRules() {
		p.jump(unix.BPF_JEQ, nr(r.name), modeLabel(r.arg), "")
		modeArgs[r.arg] = true
	}

	for _, d := range a.denied() {
		p.jump(unix.BPF_JEQ, nr(d.name), "eperm", "")
	}
	p.ret(actAllow)

	p.label("ioctl")
	p.load32(offArgLow(1))
	for i, d := range deniedIoctls {
		jf := ""
		if i == len(deniedIoctls)-1 {
			jf = "allow"
		}
		p.jump(unix.BPF_JEQ, d.req, "eperm", jf)
	}

	for _, r := range namespaceRules {
		p.label(r.name)
		p.load32(offArgLow(r.arg))
		p.jump(unix.BPF_JSET, r.flags, "eperm", "allow")
	}

	for arg := uint32(0); arg < 6; arg++ {
		if !modeArgs[arg] {
			continue
		}
		p.label(modeLabel(arg))
		p.load32(offArgLow(arg))
		p.jump(unix.BPF_JSET, setIDBits, "eperm", "allow")
	}

	p.label("personality")
	p.load32(offArgLow(0))
	for i, v := range allowedPersonalities {
		jf := ""
		if i == len(allowedPersonalities)-1 {
			jf = "eperm"
		}
		p.jump(unix.BPF_JEQ, v, "allow", jf)
	}

	p.label("allow")
	p.ret(actAllow)
	p.label("eperm")
	p.ret(actEPERM)
	p.label("enosys")
	p.ret(actENOSYS)
	p.label("kill")
	p.ret(actKill)

	return p.assemble()
}

func modeLabel(arg uint32) string { return fmt.Sprintf("mode%d", arg) }

// Denied lists what the filter blocks on the architecture agentbox runs
// on, one entry per call or rule, for documentation and --help.
func Denied() []string {
	a, err := nativeArch()
	if err != nil {
		return nil
	}
	var out []string
	for _, d := range a.denied() {
		out = append(out, d.name)
	}
	out = append(out, "clone and unshare with namespace flags (CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWIPC, CLONE_NEWUTS, CLONE_NEWCGROUP, CLONE_NEWTIME)")
	for _, c := range enosysCalls {
		out = append(out, fmt.Sprintf("%s (ENOSYS, so callers fall back to %s)", c.name, c.fallback))
	}
	var modes []string
	for _, r := range a.modeRules() {
		modes = append(modes, r.name)
	}
	ioctls := make([]string, len(deniedIoctls))
	for i, d := range deniedIoctls {
		ioctls[i] = d.name
	}
	out = append(out,
		strings.Join(modes, ", ")+" with a setuid or setgid mode",
		"personality other than PER_LINUX and the query 0xffffffff",
		"ioctl "+strings.Join(ioctls, ", "),
		"system calls newer than "+newestReviewed+" (ENOSYS until reviewed)",
	)
	if a.x32 {
		out = append(out, "x32-ABI system calls")
	}
	out = append(out, "system calls from a foreign architecture (the process is killed)")
	return out
}
