//go:build linux && (amd64 || arm64)

package seccomp

import "golang.org/x/sys/unix"

// rule denies one system call outright with EPERM.
type rule struct {
	name string
	nr   uint32
	// threat is what a sandboxed command could do with the call. It is
	// documentation that lives next to the number it explains.
	threat string
}

// commonRules are denied on every supported architecture. unix.SYS_*
// numbers are those of the architecture being built.
var commonRules = []rule{
	// Debugging and memory of other processes.
	{"ptrace", unix.SYS_PTRACE, "read/write another process's memory and registers, hijack it"},
	{"process_vm_readv", unix.SYS_PROCESS_VM_READV, "read another process's memory"},
	{"process_vm_writev", unix.SYS_PROCESS_VM_WRITEV, "write another process's memory"},
	{"pidfd_getfd", unix.SYS_PIDFD_GETFD, "steal an open file descriptor from another process"},
	{"process_madvise", unix.SYS_PROCESS_MADVISE, "reclaim or page out another process's memory"},
	{"kcmp", unix.SYS_KCMP, "probe kernel object identity of other processes (a KASLR/infoleak aid)"},

	// Mounts: the sandbox's filesystem view is fixed by the backend.
	{"mount", unix.SYS_MOUNT, "remount or bind host paths, hide read-only binds"},
	{"umount2", unix.SYS_UMOUNT2, "unmount a bind and reveal what it covered"},
	{"pivot_root", unix.SYS_PIVOT_ROOT, "change the root filesystem"},
	{"chroot", unix.SYS_CHROOT, "chroot-based escapes with a leaked directory fd"},
	{"move_mount", unix.SYS_MOVE_MOUNT, "new mount API: attach mounts"},
	{"open_tree", unix.SYS_OPEN_TREE, "new mount API: clone mount trees"},
	{"open_tree_attr", unix.SYS_OPEN_TREE_ATTR, "new mount API: clone mount trees with new attributes"},
	{"fsopen", unix.SYS_FSOPEN, "new mount API: create a filesystem context"},
	{"fsconfig", unix.SYS_FSCONFIG, "new mount API: configure a filesystem (superblock parsing bugs)"},
	{"fsmount", unix.SYS_FSMOUNT, "new mount API: create a mount"},
	{"fspick", unix.SYS_FSPICK, "new mount API: reconfigure an existing superblock"},
	{"mount_setattr", unix.SYS_MOUNT_SETATTR, "change mount flags (make a read-only bind writable)"},

	// Namespaces. clone and unshare are filtered by flags, clone3 gets
	// ENOSYS (see filter.go); setns is denied whole.
	{"setns", unix.SYS_SETNS, "join another namespace (the host's, through a leaked fd)"},

	// Large kernel attack surface that tools do not need.
	{"bpf", unix.SYS_BPF, "load eBPF programs: verifier bugs are a classic kernel exploit path"},
	{"perf_event_open", unix.SYS_PERF_EVENT_OPEN, "perf events: kernel exploit surface and side channels"},
	{"userfaultfd", unix.SYS_USERFAULTFD, "stall kernel page faults to win kernel race conditions"},
	{"io_uring_setup", unix.SYS_IO_URING_SETUP, "io_uring: frequent kernel exploit surface, bypasses seccomp for its operations"},
	{"io_uring_enter", unix.SYS_IO_URING_ENTER, "io_uring: submit operations that seccomp cannot see"},
	{"io_uring_register", unix.SYS_IO_URING_REGISTER, "io_uring: register buffers and files"},
	{"keyctl", unix.SYS_KEYCTL, "kernel keyrings are not namespaced: read or plant host keys"},
	{"add_key", unix.SYS_ADD_KEY, "kernel keyrings are not namespaced"},
	{"request_key", unix.SYS_REQUEST_KEY, "kernel keyrings are not namespaced; may upcall to host helpers"},
	{"fanotify_init", unix.SYS_FANOTIFY_INIT, "filesystem-wide event monitoring"},
	{"open_by_handle_at", unix.SYS_OPEN_BY_HANDLE_AT, "open any inode of a filesystem by handle, bypassing the mount view (the 'shocker' escape)"},
	{"name_to_handle_at", unix.SYS_NAME_TO_HANDLE_AT, "obtain file handles for open_by_handle_at"},

	// Whole-machine state.
	{"kexec_load", unix.SYS_KEXEC_LOAD, "replace the running kernel"},
	{"kexec_file_load", unix.SYS_KEXEC_FILE_LOAD, "replace the running kernel"},
	{"init_module", unix.SYS_INIT_MODULE, "load kernel code"},
	{"finit_module", unix.SYS_FINIT_MODULE, "load kernel code"},
	{"delete_module", unix.SYS_DELETE_MODULE, "unload kernel code"},
	{"reboot", unix.SYS_REBOOT, "reboot or halt the host"},
	{"swapon", unix.SYS_SWAPON, "add swap, read swapped host memory"},
	{"swapoff", unix.SYS_SWAPOFF, "remove swap"},
	{"acct", unix.SYS_ACCT, "switch process accounting to an attacker file"},
	{"settimeofday", unix.SYS_SETTIMEOFDAY, "set the host clock (time is not namespaced)"},
	{"clock_settime", unix.SYS_CLOCK_SETTIME, "set the host clock"},
	{"clock_adjtime", unix.SYS_CLOCK_ADJTIME, "adjust the host clock"},
	{"adjtimex", unix.SYS_ADJTIMEX, "adjust the host clock"},
	{"quotactl", unix.SYS_QUOTACTL, "change filesystem quotas"},
	{"quotactl_fd", unix.SYS_QUOTACTL_FD, "change filesystem quotas"},
	{"lookup_dcookie", unix.SYS_LOOKUP_DCOOKIE, "resolve kernel dentry cookies to host paths"},
	{"vhangup", unix.SYS_VHANGUP, "hang up the controlling terminal (of the host session)"},
	{"syslog", unix.SYS_SYSLOG, "read the kernel log (kernel addresses, host activity) or clear it"},
	{"nfsservctl", unix.SYS_NFSSERVCTL, "obsolete NFS server control"},
}

// Flag-filtered calls. The kernel reads these arguments as 32-bit values
// (clone's flags are truncated with lower_32_bits, unshare rejects high
// bits, personality and ioctl's request are unsigned int), so comparing the
// low word of the argument is exact.

// namespaceFlags are the clone(2) flags that create a namespace. A
// sandboxed command must not create namespaces: a new user namespace gives
// it a full capability set against a huge, bug-prone kernel surface (most
// container-escape CVEs of recent years start with unshare(CLONE_NEWUSER)).
const namespaceFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS |
	unix.CLONE_NEWIPC | unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET

// unshareFlags adds CLONE_NEWTIME, which unshare accepts but clone does not
// (in clone its bit is part of the exit-signal byte).
const unshareFlags = namespaceFlags | unix.CLONE_NEWTIME

// Allowed personality(2) values: PER_LINUX and the query 0xffffffff. Other
// values turn on ADDR_NO_RANDOMIZE (disables ASLR for what the command
// execs), READ_IMPLIES_EXEC and other legacy execution domains.
const (
	personalityLinux = 0x0
	personalityQuery = 0xffffffff
)

// deniedIoctls are ioctl(2) requests refused with EPERM. TIOCSTI pushes
// bytes into a terminal's input queue: a sandboxed command sharing the
// user's terminal could type commands into the shell that runs agentbox.
// TIOCLINUX has similar console-injection subcommands.
var deniedIoctls = []struct {
	name string
	req  uint32
}{
	{"TIOCSTI", unix.TIOCSTI},
	{"TIOCLINUX", unix.TIOCLINUX},
}

// setIDBits are the mode bits that make an executable run with its owner's
// or group's identity.
const setIDBits = unix.S_ISUID | unix.S_ISGID

// modeRule is a call refused when its mode argument (argument arg) carries
// setIDBits. Threat: without a user namespace, a file a command creates in
// a host workspace directory belongs to a real host uid (0 for a command
// run as root inside, 1000 otherwise). The sandbox's own mounts are
// nosuid, but the host's view of that directory need not be: a setuid
// copy of a shell planted there would run with that uid for any host user
// who executes it. chmod, creation modes and mknod are the ways to set the
// bits; the kernel reads modes as 32-bit values, so the low word is exact.
type modeRule struct {
	name string
	nr   uint32
	arg  uint32
}

// commonModeRules exist on every supported architecture.
var commonModeRules = []modeRule{
	{"fchmod", unix.SYS_FCHMOD, 1},
	{"fchmodat", unix.SYS_FCHMODAT, 2},
	{"fchmodat2", unix.SYS_FCHMODAT2, 2},
	{"mknodat", unix.SYS_MKNODAT, 2},
	{"openat", unix.SYS_OPENAT, 3},
}

// Offsets into struct seccomp_data { int nr; u32 arch; u64 ip; u64 args[6]; }.
const (
	offNr   = 0
	offArch = 4
)

// offArgLow is the offset of the low 32 bits of argument i. Both supported
// architectures are little-endian.
func offArgLow(i uint32) uint32 { return 16 + 8*i }
