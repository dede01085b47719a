//go:build linux && amd64

package seccomp

import "golang.org/x/sys/unix"

// archProbe gives harmless arguments for the x86_64-only denials.
func archProbe(r rule) probe {
	p := probe{name: r.name, nr: uintptr(r.nr), want: unix.EPERM}
	switch r.nr {
	case unix.SYS_IOPL:
		p.args[0] = 4 // levels are 0..3: EINVAL
	case unix.SYS_IOPERM:
		p.args = [6]uintptr{1 << 30, 1, 1} // beyond the I/O space: EINVAL
	case unix.SYS_USELIB, unix.SYS__SYSCTL:
		p.args[0] = badPtr
	}
	return p
}
