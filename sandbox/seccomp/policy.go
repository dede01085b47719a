//go:build linux

package seccomp

import "golang.org/x/sys/unix"

// The policy is data: system calls by name, and the argument rules that
// decide some of them. bpf.go compiles it to the native filter and
// profile.go to the Docker profile, for each architecture in arch.go,
// whose tables give the numbers. A call that exists on one architecture
// only says so in its only field; any other name missing from an
// architecture's table is an error, so a typo cannot drop a rule.

// deniedCall is a system call refused outright with EPERM.
type deniedCall struct {
	name string
	// only is the one GOARCH that has the call; "" means every supported
	// architecture.
	only string
	// threat is what a sandboxed command could do with the call. It is
	// documentation that lives next to the name it explains.
	threat string
}

// deniedCalls are refused on every architecture that has them.
var deniedCalls = []deniedCall{
	// Debugging and memory of other processes.
	{"ptrace", "", "read/write another process's memory and registers, hijack it"},
	{"process_vm_readv", "", "read another process's memory"},
	{"process_vm_writev", "", "write another process's memory"},
	{"pidfd_getfd", "", "steal an open file descriptor from another process"},
	{"process_madvise", "", "reclaim or page out another process's memory"},
	{"kcmp", "", "probe kernel object identity of other processes (a KASLR/infoleak aid)"},

	// Mounts: the sandbox's filesystem view is fixed by the backend.
	{"mount", "", "remount or bind host paths, hide read-only binds"},
	{"umount2", "", "unmount a bind and reveal what it covered"},
	{"pivot_root", "", "change the root filesystem"},
	{"chroot", "", "chroot-based escapes with a leaked directory fd"},
	{"move_mount", "", "new mount API: attach mounts"},
	{"open_tree", "", "new mount API: clone mount trees"},
	{"open_tree_attr", "", "new mount API: clone mount trees with new attributes"},
	{"fsopen", "", "new mount API: create a filesystem context"},
	{"fsconfig", "", "new mount API: configure a filesystem (superblock parsing bugs)"},
	{"fsmount", "", "new mount API: create a mount"},
	{"fspick", "", "new mount API: reconfigure an existing superblock"},
	{"mount_setattr", "", "change mount flags (make a read-only bind writable)"},

	// Namespaces. clone and unshare are filtered by flags (namespaceRules),
	// clone3 gets ENOSYS (enosysCalls); setns is denied whole.
	{"setns", "", "join another namespace (the host's, through a leaked fd)"},

	// Large kernel attack surface that tools do not need.
	{"bpf", "", "load eBPF programs: verifier bugs are a classic kernel exploit path"},
	{"perf_event_open", "", "perf events: kernel exploit surface and side channels"},
	{"userfaultfd", "", "stall kernel page faults to win kernel race conditions"},
	{"io_uring_setup", "", "io_uring: frequent kernel exploit surface, bypasses seccomp for its operations"},
	{"io_uring_enter", "", "io_uring: submit operations that seccomp cannot see"},
	{"io_uring_register", "", "io_uring: register buffers and files"},
	{"keyctl", "", "kernel keyrings are not namespaced: read or plant host keys"},
	{"add_key", "", "kernel keyrings are not namespaced"},
	{"request_key", "", "kernel keyrings are not namespaced; may upcall to host helpers"},
	{"fanotify_init", "", "filesystem-wide event monitoring"},
	{"open_by_handle_at", "", "open any inode of a filesystem by handle, bypassing the mount view (the 'shocker' escape)"},
	{"name_to_handle_at", "", "obtain file handles for open_by_handle_at"},

	// Whole-machine state.
	{"kexec_load", "", "replace the running kernel"},
	{"kexec_file_load", "", "replace the running kernel"},
	{"init_module", "", "load kernel code"},
	{"finit_module", "", "load kernel code"},
	{"delete_module", "", "unload kernel code"},
	{"reboot", "", "reboot or halt the host"},
	{"swapon", "", "add swap, read swapped host memory"},
	{"swapoff", "", "remove swap"},
	{"acct", "", "switch process accounting to an attacker file"},
	{"settimeofday", "", "set the host clock (time is not namespaced)"},
	{"clock_settime", "", "set the host clock"},
	{"clock_adjtime", "", "adjust the host clock"},
	{"adjtimex", "", "adjust the host clock"},
	{"quotactl", "", "change filesystem quotas"},
	{"quotactl_fd", "", "change filesystem quotas"},
	{"lookup_dcookie", "", "resolve kernel dentry cookies to host paths"},
	{"vhangup", "", "hang up the controlling terminal (of the host session)"},
	{"syslog", "", "read the kernel log (kernel addresses, host activity) or clear it"},
	{"nfsservctl", "", "obsolete NFS server control"},

	// x86_64 only: port I/O and obsolete interfaces.
	{"iopl", "amd64", "raise I/O privilege level: direct port I/O to hardware"},
	{"ioperm", "amd64", "direct port I/O to hardware"},
	{"_sysctl", "amd64", "obsolete binary sysctl interface"},
	{"uselib", "amd64", "obsolete a.out library loader with a history of bugs"},
	{"create_module", "amd64", "obsolete module loading"},
	{"get_kernel_syms", "amd64", "obsolete kernel symbol export"},
	{"query_module", "amd64", "obsolete module query"},
}

// newestReviewed is the newest system call reviewed for this policy
// (file_setattr, Linux 6.17; the same number on amd64 and arm64). Calls
// numbered above it are refused (ENOSYS in the native filter, exactly as
// on a kernel that predates them), so a call added to Linux later is
// refused until this list is reviewed again.
const newestReviewed = "file_setattr"

// enosysCalls fail with ENOSYS, as on a kernel without them: each passes
// in user memory an argument that seccomp cannot read (clone3 its flags,
// openat2 its creation mode), and on ENOSYS callers (glibc 2.34+ for
// clone3) fall back to the older call, whose arguments the policy checks.
var enosysCalls = []struct{ name, fallback string }{
	{"clone3", "clone"},
	{"openat2", "openat"},
}

// Argument rules. The kernel reads these arguments as 32-bit values
// (clone's flags are truncated with lower_32_bits, unshare rejects high
// bits, personality and ioctl's request are unsigned int, modes are
// umode_t), so comparing the low word of the argument is exact.

// flagRule refuses a call when its argument arg carries any of flags.
type flagRule struct {
	name  string
	arg   uint32
	flags uint32
}

// namespaceFlags are the clone(2) flags that create a namespace. A
// sandboxed command must not create namespaces: a new user namespace gives
// it a full capability set against a huge, bug-prone kernel surface (most
// container-escape CVEs of recent years start with unshare(CLONE_NEWUSER)).
const namespaceFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS |
	unix.CLONE_NEWIPC | unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET

// unshareFlags adds CLONE_NEWTIME, which unshare accepts but clone does not
// (in clone its bit is part of the exit-signal byte).
const unshareFlags = namespaceFlags | unix.CLONE_NEWTIME

// namespaceRules allow clone and unshare only without namespace flags.
var namespaceRules = []flagRule{
	{"clone", 0, namespaceFlags},
	{"unshare", 0, unshareFlags},
}

// Allowed personality(2) values: PER_LINUX and the query 0xffffffff. Other
// values turn on ADDR_NO_RANDOMIZE (disables ASLR for what the command
// execs), READ_IMPLIES_EXEC and other legacy execution domains.
var allowedPersonalities = []uint32{0x0, 0xffffffff}

// ioctlRule is an ioctl(2) request refused with EPERM.
type ioctlRule struct {
	name string
	req  uint32
}

// deniedIoctls are ioctl(2) requests refused with EPERM. TIOCSTI pushes
// bytes into a terminal's input queue: a sandboxed command sharing the
// user's terminal could type commands into the shell that runs agentbox.
// TIOCLINUX has similar console-injection subcommands. The request numbers
// are the same on amd64 and arm64. The Docker profile does not carry this
// rule (see profile.go).
var deniedIoctls = []ioctlRule{
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
// bits.
type modeRule struct {
	name string
	only string // as in deniedCall
	arg  uint32
}

// setIDModeRules are the calls that take a file mode. arm64 has only the
// *at forms.
var setIDModeRules = []modeRule{
	{"fchmod", "", 1},
	{"fchmodat", "", 2},
	{"fchmodat2", "", 2},
	{"mknodat", "", 2},
	{"openat", "", 3},
	{"chmod", "amd64", 1},
	{"creat", "amd64", 1},
	{"open", "amd64", 2},
	{"mknod", "amd64", 1},
}
