//go:build linux && (amd64 || arm64)

package seccomp

import (
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// maxReviewed is the newest system call number reviewed for this filter
// (file_setattr, Linux 6.17; the same number on amd64 and arm64). Anything
// above it fails with ENOSYS, exactly as on a kernel that predates it, so a
// call added to Linux later is refused until this list is reviewed again.
const maxReviewed = unix.SYS_FILE_SETATTR

// Seccomp actions.
const (
	actAllow  = unix.SECCOMP_RET_ALLOW
	actEPERM  = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	actENOSYS = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
	// actKill ends the whole process (not only the thread), so a
	// multi-threaded program cannot keep running half-killed.
	actKill = unix.SECCOMP_RET_KILL_PROCESS
)

// Filter returns the seccomp program that Install loads, for inspection
// and tests. It is rebuilt on each call; the result may be modified freely.
func Filter() ([]unix.SockFilter, error) {
	p := newProgram()

	// A syscall from another ABI (i386 via int 0x80, arm32 compat) has
	// other numbers; a table for the native ABI would let it through.
	p.load32(offArch)
	p.jump(unix.BPF_JEQ, nativeArch, "", "kill")

	p.load32(offNr)
	if hasX32 {
		// x32 calls share AUDIT_ARCH_X86_64 and differ only by this bit.
		p.jump(unix.BPF_JGE, x32Bit, "eperm", "")
	}
	p.jump(unix.BPF_JGT, maxReviewed, "enosys", "")

	// Calls decided by their arguments. ioctl is first because it is by
	// far the most frequent of them; calls that are always allowed do not
	// pay for this filter at all once the kernel's seccomp cache (5.11+)
	// has seen them.
	p.jump(unix.BPF_JEQ, unix.SYS_IOCTL, "ioctl", "")
	p.jump(unix.BPF_JEQ, unix.SYS_CLONE, "clone", "")
	p.jump(unix.BPF_JEQ, unix.SYS_UNSHARE, "unshare", "")
	p.jump(unix.BPF_JEQ, unix.SYS_PERSONALITY, "personality", "")
	// clone3 passes its flags in a struct in user memory, which seccomp
	// cannot read; ENOSYS makes glibc (2.34+) fall back to clone, whose
	// flags we can check.
	p.jump(unix.BPF_JEQ, unix.SYS_CLONE3, "enosys", "")
	// openat2 passes its creation mode in a struct too; ENOSYS makes
	// callers fall back to openat, whose mode we check.
	p.jump(unix.BPF_JEQ, unix.SYS_OPENAT2, "enosys", "")
	modeArgs := map[uint32]bool{}
	for _, r := range allModeRules() {
		p.jump(unix.BPF_JEQ, r.nr, modeLabel(r.arg), "")
		modeArgs[r.arg] = true
	}

	for _, r := range allRules() {
		p.jump(unix.BPF_JEQ, r.nr, "eperm", "")
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

	p.label("clone")
	p.load32(offArgLow(0))
	p.jump(unix.BPF_JSET, namespaceFlags, "eperm", "allow")

	p.label("unshare")
	p.load32(offArgLow(0))
	p.jump(unix.BPF_JSET, unshareFlags, "eperm", "allow")

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
	p.jump(unix.BPF_JEQ, personalityLinux, "allow", "")
	p.jump(unix.BPF_JEQ, personalityQuery, "allow", "eperm")

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

// allModeRules is the mode-checked calls for this architecture.
func allModeRules() []modeRule {
	return append(append([]modeRule(nil), commonModeRules...), archModeRules...)
}

// SetIDModeArgs maps each call that the filter refuses when its mode
// carries the setuid or setgid bit to the index of that mode argument, so
// that other enforcers (the Docker profile) can mirror the rule.
func SetIDModeArgs() map[string]int {
	out := map[string]int{}
	for _, r := range allModeRules() {
		out[r.name] = int(r.arg)
	}
	return out
}

func modeLabel(arg uint32) string { return fmt.Sprintf("mode%d", arg) }

// allRules is the outright denials for this architecture.
func allRules() []rule {
	return append(append([]rule(nil), commonRules...), archRules...)
}

// Denied lists what the filter blocks, one entry per call or rule, for
// documentation and --help.
func Denied() []string {
	var out []string
	for _, r := range allRules() {
		out = append(out, r.name)
	}
	ioctls := make([]string, len(deniedIoctls))
	for i, d := range deniedIoctls {
		ioctls[i] = d.name
	}
	out = append(out,
		"clone and unshare with namespace flags (CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWIPC, CLONE_NEWUTS, CLONE_NEWCGROUP, CLONE_NEWTIME)",
		"clone3 (ENOSYS, so libc falls back to clone)",
		"chmod, fchmod, fchmodat, fchmodat2, creat, open, openat, mknod, mknodat with a setuid or setgid mode",
		"openat2 (ENOSYS, so callers fall back to openat)",
		"personality other than PER_LINUX and the query 0xffffffff",
		"ioctl "+strings.Join(ioctls, ", "),
		"system calls newer than file_setattr (ENOSYS until reviewed)",
	)
	if hasX32 {
		out = append(out, "x32-ABI system calls")
	}
	out = append(out, "system calls from a foreign architecture (the process is killed)")
	return out
}
