//go:build linux

package seccomp

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// probe is one system call tried in a child. Its arguments are chosen so
// that, should the filter fail to stop it, the kernel still rejects it
// harmlessly (a bad pointer, descriptor or flag); the control run without
// the filter proves that this rejection is not itself EPERM, i.e. that the
// EPERM under the filter comes from the filter.
type probe struct {
	name string
	nr   uintptr
	args [6]uintptr
	// want is the errno under the filter (0 for allowed calls that
	// succeed).
	want unix.Errno
	// noControl skips the unfiltered run: the call would do something
	// unwelcome to the test host if it succeeded.
	noControl bool
}

const (
	badPtr = 1 // an address that faults
	badFD  = ^uintptr(0)
	// cloneInvalid and unshareInvalid make clone and unshare fail with EINVAL before doing
	// anything in a multi-threaded Go process (CLONE_SIGHAND without
	// CLONE_VM for clone, CLONE_THREAD for unshare), while leaving the
	// namespace bit for the filter to see.
	cloneInvalid   = unix.CLONE_SIGHAND
	unshareInvalid = unix.CLONE_THREAD
)

func probes() []probe {
	ps := []probe{
		{name: "ptrace", nr: unix.SYS_PTRACE, args: [6]uintptr{0xdead, 0}, want: unix.EPERM},
		{name: "process_vm_readv", nr: unix.SYS_PROCESS_VM_READV, args: [6]uintptr{1, 0, 0, 0, 0, 1}, want: unix.EPERM},
		{name: "process_vm_writev", nr: unix.SYS_PROCESS_VM_WRITEV, args: [6]uintptr{1, 0, 0, 0, 0, 1}, want: unix.EPERM},
		{name: "pidfd_getfd", nr: unix.SYS_PIDFD_GETFD, args: [6]uintptr{badFD, 0, 0}, want: unix.EPERM},
		{name: "process_madvise", nr: unix.SYS_PROCESS_MADVISE, args: [6]uintptr{badFD, 0, 0, 0, 0}, want: unix.EPERM},
		{name: "kcmp", nr: unix.SYS_KCMP, args: [6]uintptr{0x7fffffff, 0x7fffffff, 0, 0, 0}, want: unix.EPERM},
		{name: "mount", nr: unix.SYS_MOUNT, args: [6]uintptr{badPtr, badPtr, badPtr, 0, 0}, want: unix.EPERM},
		{name: "umount2", nr: unix.SYS_UMOUNT2, args: [6]uintptr{badPtr, 0}, want: unix.EPERM},
		{name: "pivot_root", nr: unix.SYS_PIVOT_ROOT, args: [6]uintptr{badPtr, badPtr}, want: unix.EPERM},
		{name: "chroot", nr: unix.SYS_CHROOT, args: [6]uintptr{badPtr}, want: unix.EPERM},
		{name: "move_mount", nr: unix.SYS_MOVE_MOUNT, args: [6]uintptr{badFD, badPtr, badFD, badPtr, 0xffffffff}, want: unix.EPERM},
		{name: "open_tree", nr: unix.SYS_OPEN_TREE, args: [6]uintptr{badFD, badPtr, 0xffffffff}, want: unix.EPERM},
		{name: "open_tree_attr", nr: unix.SYS_OPEN_TREE_ATTR, args: [6]uintptr{badFD, badPtr, 0xffffffff, badPtr, 0}, want: unix.EPERM},
		{name: "fsopen", nr: unix.SYS_FSOPEN, args: [6]uintptr{badPtr, 0xffffffff}, want: unix.EPERM},
		{name: "fsconfig", nr: unix.SYS_FSCONFIG, args: [6]uintptr{badFD, 0xffff, 0, 0, 0}, want: unix.EPERM},
		{name: "fsmount", nr: unix.SYS_FSMOUNT, args: [6]uintptr{badFD, 0xffffffff, 0}, want: unix.EPERM},
		{name: "fspick", nr: unix.SYS_FSPICK, args: [6]uintptr{badFD, badPtr, 0xffffffff}, want: unix.EPERM},
		{name: "mount_setattr", nr: unix.SYS_MOUNT_SETATTR, args: [6]uintptr{badFD, badPtr, 0xffffffff, badPtr, 0}, want: unix.EPERM},
		{name: "setns", nr: unix.SYS_SETNS, args: [6]uintptr{badFD, 0}, want: unix.EPERM},
		{name: "bpf", nr: unix.SYS_BPF, args: [6]uintptr{0xffff, 0, 0}, want: unix.EPERM},
		{name: "perf_event_open", nr: unix.SYS_PERF_EVENT_OPEN, args: [6]uintptr{badPtr, 0, 0, badFD, 0}, want: unix.EPERM},
		{name: "userfaultfd", nr: unix.SYS_USERFAULTFD, args: [6]uintptr{0xffffffff}, want: unix.EPERM},
		{name: "io_uring_setup", nr: unix.SYS_IO_URING_SETUP, args: [6]uintptr{0, badPtr}, want: unix.EPERM},
		{name: "io_uring_enter", nr: unix.SYS_IO_URING_ENTER, args: [6]uintptr{badFD, 0, 0, 0, 0, 0}, want: unix.EPERM},
		{name: "io_uring_register", nr: unix.SYS_IO_URING_REGISTER, args: [6]uintptr{badFD, 0, 0, 0}, want: unix.EPERM},
		{name: "keyctl", nr: unix.SYS_KEYCTL, args: [6]uintptr{0xffff, 0, 0, 0, 0}, want: unix.EPERM},
		{name: "add_key", nr: unix.SYS_ADD_KEY, args: [6]uintptr{badPtr, badPtr, 0, 0, 0}, want: unix.EPERM},
		{name: "request_key", nr: unix.SYS_REQUEST_KEY, args: [6]uintptr{badPtr, badPtr, 0, 0}, want: unix.EPERM},
		{name: "fanotify_init", nr: unix.SYS_FANOTIFY_INIT, args: [6]uintptr{0xffffffff, 0}, want: unix.EPERM},
		{name: "open_by_handle_at", nr: unix.SYS_OPEN_BY_HANDLE_AT, args: [6]uintptr{badFD, badPtr, 0}, want: unix.EPERM},
		{name: "name_to_handle_at", nr: unix.SYS_NAME_TO_HANDLE_AT, args: [6]uintptr{badFD, badPtr, badPtr, badPtr, 0xffffffff}, want: unix.EPERM},
		{name: "kexec_load", nr: unix.SYS_KEXEC_LOAD, args: [6]uintptr{0, 0, 0, 0xffff0000}, want: unix.EPERM},
		{name: "kexec_file_load", nr: unix.SYS_KEXEC_FILE_LOAD, args: [6]uintptr{badFD, badFD, 0, 0, 0xffffffff}, want: unix.EPERM},
		{name: "init_module", nr: unix.SYS_INIT_MODULE, args: [6]uintptr{0, 0, 0}, want: unix.EPERM},
		{name: "finit_module", nr: unix.SYS_FINIT_MODULE, args: [6]uintptr{badFD, 0, 0}, want: unix.EPERM},
		{name: "delete_module", nr: unix.SYS_DELETE_MODULE, args: [6]uintptr{badPtr, 0}, want: unix.EPERM},
		{name: "reboot", nr: unix.SYS_REBOOT, args: [6]uintptr{0, 0, 0, 0}, want: unix.EPERM},
		{name: "swapon", nr: unix.SYS_SWAPON, args: [6]uintptr{badPtr, 0}, want: unix.EPERM},
		{name: "swapoff", nr: unix.SYS_SWAPOFF, args: [6]uintptr{badPtr}, want: unix.EPERM},
		{name: "acct", nr: unix.SYS_ACCT, args: [6]uintptr{badPtr}, want: unix.EPERM},
		{name: "settimeofday", nr: unix.SYS_SETTIMEOFDAY, args: [6]uintptr{badPtr, 0}, want: unix.EPERM},
		{name: "clock_settime", nr: unix.SYS_CLOCK_SETTIME, args: [6]uintptr{0x7fff, badPtr}, want: unix.EPERM},
		{name: "clock_adjtime", nr: unix.SYS_CLOCK_ADJTIME, args: [6]uintptr{0x7fff, badPtr}, want: unix.EPERM},
		{name: "adjtimex", nr: unix.SYS_ADJTIMEX, args: [6]uintptr{badPtr}, want: unix.EPERM},
		{name: "quotactl", nr: unix.SYS_QUOTACTL, args: [6]uintptr{0xffffffff, badPtr, 0, 0}, want: unix.EPERM},
		{name: "quotactl_fd", nr: unix.SYS_QUOTACTL_FD, args: [6]uintptr{badFD, 0xffffffff, 0, 0}, want: unix.EPERM},
		{name: "lookup_dcookie", nr: unix.SYS_LOOKUP_DCOOKIE, args: [6]uintptr{0, badPtr, 0}, want: unix.EPERM},
		{name: "vhangup", nr: unix.SYS_VHANGUP, want: unix.EPERM, noControl: true},
		{name: "syslog", nr: unix.SYS_SYSLOG, args: [6]uintptr{0xffff, 0, 0}, want: unix.EPERM},
		{name: "nfsservctl", nr: unix.SYS_NFSSERVCTL, want: unix.EPERM},

		// Namespace creation, filtered by flag.
		{name: "clone with CLONE_NEWUSER", nr: unix.SYS_CLONE, args: [6]uintptr{unix.CLONE_NEWUSER | cloneInvalid}, want: unix.EPERM},
		{name: "clone with CLONE_NEWNS", nr: unix.SYS_CLONE, args: [6]uintptr{unix.CLONE_NEWNS | cloneInvalid}, want: unix.EPERM},
		{name: "clone with CLONE_NEWPID", nr: unix.SYS_CLONE, args: [6]uintptr{unix.CLONE_NEWPID | cloneInvalid}, want: unix.EPERM},
		{name: "clone with CLONE_NEWNET", nr: unix.SYS_CLONE, args: [6]uintptr{unix.CLONE_NEWNET | cloneInvalid}, want: unix.EPERM},
		{name: "clone with CLONE_NEWIPC", nr: unix.SYS_CLONE, args: [6]uintptr{unix.CLONE_NEWIPC | cloneInvalid}, want: unix.EPERM},
		{name: "clone with CLONE_NEWUTS", nr: unix.SYS_CLONE, args: [6]uintptr{unix.CLONE_NEWUTS | cloneInvalid}, want: unix.EPERM},
		{name: "clone with CLONE_NEWCGROUP", nr: unix.SYS_CLONE, args: [6]uintptr{unix.CLONE_NEWCGROUP | cloneInvalid}, want: unix.EPERM},
		{name: "clone without namespace flags reaches the kernel", nr: unix.SYS_CLONE, args: [6]uintptr{cloneInvalid}, want: unix.EINVAL},
		{name: "clone3", nr: unix.SYS_CLONE3, args: [6]uintptr{badPtr, 0}, want: unix.ENOSYS},
		{name: "unshare with CLONE_NEWUSER", nr: unix.SYS_UNSHARE, args: [6]uintptr{unix.CLONE_NEWUSER | unshareInvalid}, want: unix.EPERM},
		{name: "unshare with CLONE_NEWNS", nr: unix.SYS_UNSHARE, args: [6]uintptr{unix.CLONE_NEWNS | unshareInvalid}, want: unix.EPERM},
		{name: "unshare with CLONE_NEWNET", nr: unix.SYS_UNSHARE, args: [6]uintptr{unix.CLONE_NEWNET | unshareInvalid}, want: unix.EPERM},
		{name: "unshare with CLONE_NEWTIME", nr: unix.SYS_UNSHARE, args: [6]uintptr{unix.CLONE_NEWTIME | unshareInvalid}, want: unix.EPERM},
		{name: "unshare without namespace flags reaches the kernel", nr: unix.SYS_UNSHARE, args: [6]uintptr{unshareInvalid}, want: unix.EINVAL},

		// personality and ioctl, filtered by argument.
		{name: "personality ADDR_NO_RANDOMIZE", nr: unix.SYS_PERSONALITY, args: [6]uintptr{0x0040000}, want: unix.EPERM},
		{name: "personality READ_IMPLIES_EXEC", nr: unix.SYS_PERSONALITY, args: [6]uintptr{0x0400000}, want: unix.EPERM},
		{name: "personality query is allowed", nr: unix.SYS_PERSONALITY, args: [6]uintptr{0xffffffff}, want: 0},
		{name: "personality PER_LINUX is allowed", nr: unix.SYS_PERSONALITY, args: [6]uintptr{0}, want: 0},
		{name: "ioctl TIOCSTI", nr: unix.SYS_IOCTL, args: [6]uintptr{badFD, unix.TIOCSTI, badPtr}, want: unix.EPERM},
		{name: "ioctl TIOCLINUX", nr: unix.SYS_IOCTL, args: [6]uintptr{badFD, unix.TIOCLINUX, badPtr}, want: unix.EPERM},
		{name: "ioctl TCGETS reaches the kernel", nr: unix.SYS_IOCTL, args: [6]uintptr{badFD, unix.TCGETS, badPtr}, want: unix.EBADF},

		// Numbers outside the reviewed native table.
		{name: "a call newer than the reviewed list", nr: unix.SYS_FILE_SETATTR + 1, want: unix.ENOSYS},
		{name: "getpid is allowed", nr: unix.SYS_GETPID, want: 0},
	}
	if runtime.GOARCH == "amd64" {
		ps = append(ps, probe{name: "an x32 getpid", nr: x32Bit | unix.SYS_GETPID, want: unix.EPERM})
	}
	a, err := nativeArch()
	if err != nil {
		return ps
	}
	for _, d := range a.denied() {
		if d.only != "" {
			ps = append(ps, archProbe(a, d))
		}
	}
	return ps
}

// archProbe gives harmless arguments for the denials of one architecture
// only (x86_64's port I/O and obsolete calls).
func archProbe(a *arch, d deniedCall) probe {
	p := probe{name: d.name, nr: uintptr(a.nr(d.name)), want: unix.EPERM}
	switch d.name {
	case "iopl":
		p.args[0] = 4 // levels are 0..3: EINVAL
	case "ioperm":
		p.args = [6]uintptr{1 << 30, 1, 1} // beyond the I/O space: EINVAL
	case "uselib", "_sysctl":
		p.args[0] = badPtr
	}
	return p
}
