//go:build linux && arm64

package seccomp

import "golang.org/x/sys/unix"

// nativeArch is the audit architecture the filter accepts. A 32-bit (arm)
// compat task would report AUDIT_ARCH_ARM and be killed.
const nativeArch = unix.AUDIT_ARCH_AARCH64

// x32Bit is unused on arm64, which has no x32 ABI.
const x32Bit = 0

// hasX32 says whether this architecture needs the x32 rule.
const hasX32 = false

// archRules are the arm64-only denials (none: the x86 port-I/O and
// obsolete calls do not exist here).
var archRules []rule

// archModeRules: arm64 has only the *at forms, which commonModeRules cover.
var archModeRules []modeRule
