//go:build linux && amd64

package seccomp

import "golang.org/x/sys/unix"

// nativeArch is the audit architecture the filter accepts.
const nativeArch = unix.AUDIT_ARCH_X86_64

// x32Bit marks x32-ABI system calls on x86_64. They share the arch value
// with native calls, so they are rejected by number.
const x32Bit = 0x40000000

// hasX32 says whether this architecture needs the x32 rule.
const hasX32 = true

// archRules are the x86_64-only denials.
var archRules = []rule{
	{"iopl", unix.SYS_IOPL, "raise I/O privilege level: direct port I/O to hardware"},
	{"ioperm", unix.SYS_IOPERM, "direct port I/O to hardware"},
	{"_sysctl", unix.SYS__SYSCTL, "obsolete binary sysctl interface"},
	{"uselib", unix.SYS_USELIB, "obsolete a.out library loader with a history of bugs"},
	{"create_module", unix.SYS_CREATE_MODULE, "obsolete module loading"},
	{"get_kernel_syms", unix.SYS_GET_KERNEL_SYMS, "obsolete kernel symbol export"},
	{"query_module", unix.SYS_QUERY_MODULE, "obsolete module query"},
}

// archModeRules are the x86_64-only calls that take a file mode.
var archModeRules = []modeRule{
	{"chmod", unix.SYS_CHMOD, 1},
	{"creat", unix.SYS_CREAT, 1},
	{"open", unix.SYS_OPEN, 2},
	{"mknod", unix.SYS_MKNOD, 1},
}
