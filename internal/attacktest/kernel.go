package attacktest

import (
	"testing"

	"github.com/agentbox/agentbox/sandbox"
)

// An Attack is one attack on the kernel's interface that the helper makes
// through the raw system call, and that every backend's sandbox must
// refuse the same way. The escape tests of each backend range over the
// lists below; an attack that does not apply to one backend is left out
// by that backend's test, which says why, never by a second list.
type Attack struct {
	// Name names the attack; its subtest is Name + " fails".
	Name string
	// Args are the helper's arguments.
	Args []string
	// Refusal is the errnos that mean the expected wall stopped it; any
	// other failure is reported as a different wall (Outcome.Failed).
	// Empty, any failure is the refusal.
	Refusal []string
	// Why is what the attack would give the sandbox were it not refused.
	Why string
}

// Refused runs attacks in one process of the helper at helper in s and
// asserts, each in a subtest named Name + " fails", that every one was
// refused as its Refusal says. One process for all: should one succeed,
// its subtest fails, whatever it changed for the next ones.
func Refused(t *testing.T, s sandbox.Session, helper string, attacks []Attack) {
	t.Helper()
	list := make([][]string, len(attacks))
	for i, a := range attacks {
		list[i] = a.Args
	}
	results := Batch(t, s, helper, list)
	for i, a := range attacks {
		t.Run(a.Name+" fails", func(t *testing.T) { results[i].Failed(t, a.Refusal...) })
	}
}

// MountScratch is the directory the mount attacks mount on (and
// MountScratch/old, pivot_root's put-old): a test creates both, as the
// sandbox's user, before it runs Mounts.
const MountScratch = "/tmp/m"

var (
	ws    = sandbox.DefaultWorkdir
	eperm = []string{"EPERM"}
)

// Mounts change the sandbox's view of the filesystem, which the backend
// fixed: each would uncover or make writable what a bind or a mask
// hides. A seccomp filter refuses them all (EPERM).
var Mounts = []Attack{
	{"mounting a tmpfs", []string{"mount-tmpfs", MountScratch}, eperm,
		"a mount over a path changes what the sandbox's other processes see there"},
	{"binding the root elsewhere", []string{"mount-bind", "/", MountScratch}, eperm,
		"a bind of the root without its submounts shows what they cover"},
	{"remounting the root read-write", []string{"remount-rw", "/"}, eperm,
		"the read-only root becomes writable"},
	{"unmounting /proc", []string{"umount", "/proc"}, eperm,
		"what the procfs mount masks (another /proc, the runtime's files) shows"},
	{"unmounting /proc/kcore (what masks kernel memory)", []string{"umount", "/proc/kcore"}, eperm,
		"a runtime masks /proc/kcore with a bind of /dev/null: under it is the kernel's memory"},
	{"unmounting the workspace", []string{"umount", ws}, eperm,
		"what the workspace mount covers shows"},
	{"pivot_root", []string{"pivot-root", MountScratch, MountScratch + "/old"}, eperm,
		"a new root leaves the old one, and what it hides, at a path of the attacker's choice"},
	{"chroot", []string{"chroot", MountScratch}, eperm,
		"with a directory descriptor kept open, the classic chroot escape to the real root"},
	{"fsopen (the new mount API)", []string{"fsopen"}, eperm,
		"a filesystem context parses an attacker's superblock options: a kernel bug surface"},
	{"open_tree of the workspace", []string{"open-tree", ws}, eperm,
		"a detached copy of a mount tree, attachable elsewhere"},
	{"mount_setattr to clear read-only on /usr", []string{"mount-setattr-rw", "/usr"}, eperm,
		"a read-only bind becomes writable"},
}

// Namespaces would give the sandbox a new user namespace (a full set of
// capabilities against the kernel: where most container escapes start)
// or let it join another. A seccomp filter refuses them (EPERM); opening
// the init's namespace as another user is refused first by the ptrace
// access check (EACCES).
var Namespaces = []Attack{
	{"unshare(CLONE_NEWUSER)", []string{"unshare", "user"}, eperm,
		"a user namespace in which the sandbox holds every capability"},
	{"clone(CLONE_NEWUSER)", []string{"clone-ns", "user"}, eperm,
		"the same by clone's flags"},
	{"setns into the init's mount namespace", []string{"setns", "/proc/1/ns/mnt"}, []string{"EPERM", "EACCES"},
		"joining a namespace through /proc, the way into the host's through a leaked descriptor"},
	{"setns into its own user namespace", []string{"setns", "/proc/self/ns/user"}, eperm,
		"setns is refused whole, not only for namespaces out of reach"},
	{"unshare of a mount namespace", []string{"unshare", "mount"}, eperm,
		"a private mount table, the first step to the mount attacks"},
	{"unshare of a net namespace", []string{"unshare", "net"}, eperm,
		"network configuration of its own: a kernel bug surface (netfilter, tc)"},
	{"unshare of a pid namespace", []string{"unshare", "pid"}, eperm,
		"a pid namespace of its own, and an init the backend does not watch"},
	{"unshare of a ipc namespace", []string{"unshare", "ipc"}, eperm,
		"namespaces are the backend's to make: none is the sandbox's"},
	{"unshare of a uts namespace", []string{"unshare", "uts"}, eperm,
		"a hostname of its own, and sethostname with it"},
	{"unshare of a cgroup namespace", []string{"unshare", "cgroup"}, eperm,
		"a cgroup root of its own, hiding where its limits are set"},
}

// Kernel is the kernel's attack surface that is not namespaced, or a
// common exploit path, and that tools do not need. Each attack uses
// arguments that would be harmless had the call gone through.
var Kernel = []Attack{
	{"keyctl", []string{"keyctl"}, eperm,
		"kernel keyrings are not namespaced: read or plant the host's keys"},
	{"add_key", []string{"add-key"}, eperm,
		"kernel keyrings are not namespaced"},
	{"bpf", []string{"bpf"}, eperm,
		"eBPF programs and maps: verifier bugs are a classic kernel exploit path"},
	{"io_uring", []string{"io-uring"}, eperm,
		"a frequent kernel exploit surface whose operations seccomp cannot see (containerd's RuntimeDefault profile lets it through)"},
	{"perf_event_open", []string{"perf-event-open"}, eperm,
		"perf events: kernel exploit surface and side channels"},
	{"userfaultfd", []string{"userfaultfd"}, eperm,
		"stalling the kernel's page faults wins its race conditions"},
	{"kexec_load", []string{"kexec-load"}, eperm,
		"replacing the running kernel"},
	{"init_module", []string{"init-module"}, eperm,
		"loading kernel code"},
	{"finit_module", []string{"finit-module"}, eperm,
		"loading kernel code from a file"},
	{"reboot", []string{"reboot"}, eperm,
		"rebooting or halting the host"},
	{"clock_settime", []string{"clock-settime"}, eperm,
		"time is not namespaced: setting the host's clock"},
	{"swapon", []string{"swapon"}, eperm,
		"adding swap, and reading the host's swapped memory"},
	{"reading the kernel log", []string{"syslog"}, eperm,
		"kernel addresses and the host's activity"},
	{"process_vm_readv of a sibling", []string{"process-vm-readv"}, eperm,
		"reading another process's memory without ptrace's checks"},
	{"sethostname", []string{"sethostname"}, eperm,
		"the host's name, where the uts namespace is shared"},
	{"mknod of a block device", []string{"mknod", "/tmp/sda"}, eperm,
		"a device node for the host's disk, read below every mount"},
	{"a raw socket", []string{"raw-socket"}, eperm,
		"forged packets and sniffing (no CAP_NET_RAW)"},
	{"a packet socket", []string{"packet-socket"}, eperm,
		"link-layer frames: spoofing and sniffing the node's network (no CAP_NET_RAW)"},
	{"open_by_handle_at (shocker)", []string{"open-by-handle", ws}, eperm,
		"a handle opens any inode of a host-backed filesystem, bypassing the mount view (the 'shocker' escape)"},
}

// KernelWrites write the kernel's settings for the whole machine through
// /proc and /sys, which a backend mounts read-only, masks or leaves out:
// any failure is a refusal (EROFS, ENOENT, EACCES, by backend and path),
// except that lowering oom_score_adj needs CAP_SYS_RESOURCE.
var KernelWrites = []Attack{
	{"writing /proc/sys/kernel/core_pattern", []string{"write", "/proc/sys/kernel/core_pattern", "|" + ws + "/pwn"}, nil,
		"the kernel runs the core_pattern program as root on the host when any process dumps core"},
	{"writing /proc/sys/kernel/modprobe", []string{"write", "/proc/sys/kernel/modprobe", ws + "/pwn"}, nil,
		"the kernel runs the modprobe program as root on the host when it wants a module"},
	{"writing /proc/sys/kernel/panic", []string{"write", "/proc/sys/kernel/panic", "1"}, nil,
		"the host's behaviour on a panic"},
	{"writing /proc/sys/vm/drop_caches", []string{"write", "/proc/sys/vm/drop_caches", "3"}, nil,
		"the host's page cache dropped: a denial of service to every other tenant"},
	{"writing /proc/sys/kernel/hostname", []string{"write", "/proc/sys/kernel/hostname", "escaped"}, nil,
		"the host's name, where the uts namespace is shared"},
	{"writing /proc/sys/net/ipv4/ip_forward", []string{"write", "/proc/sys/net/ipv4/ip_forward", "1"}, nil,
		"routing through the sandbox's network namespace"},
	{"writing /proc/sysrq-trigger", []string{"write", "/proc/sysrq-trigger", "h"}, nil,
		"magic SysRq: crash, reboot or freeze the host"},
	{"writing /sys/kernel/uevent_helper", []string{"write", "/sys/kernel/uevent_helper", ws + "/pwn"}, nil,
		"the kernel runs the uevent helper as root on the host at each device event"},
	{"writing /sys/fs/cgroup/cgroup.procs", []string{"write", "/sys/fs/cgroup/cgroup.procs", "1"}, nil,
		"moving a process out of the cgroup that bounds it"},
	{"writing /proc/1/mem", []string{"write", "/proc/1/mem", "x"}, nil,
		"the memory of the init that holds the sandbox together"},
	{"writing /proc/1/attr/current", []string{"write", "/proc/1/attr/current", "unconfined"}, nil,
		"the init's LSM label, to shed an AppArmor or SELinux confinement"},
	{"lowering oom_score_adj", []string{"write", "/proc/self/oom_score_adj", "-1000"}, []string{"EACCES", "EPERM"},
		"the OOM killer would take the host's processes before the sandbox's"},
}
