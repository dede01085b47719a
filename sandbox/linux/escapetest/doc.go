// Package escapetest attacks the native Linux backend (sandbox/linux) from
// inside real sessions and asserts that every attack fails. It has no
// API: it is a test suite, one test per attack, named after the attack.
//
// The attacks that shell tools cannot make are made by a small static Go
// program, internal/attacktest's helper (shared with the kube backend's
// escape tests), built once in TestMain (CGO_ENABLED=0, so it needs
// nothing in the sandbox) and bound read-only into every session at
// /opt/escapetest. Each invocation tries one attack (or a batch of them,
// in one process) through the raw system call and reports the errno that
// stopped it, so a test can also tell which wall did. The attacks on the
// kernel's interface (mounts, namespaces, keyrings, bpf, io_uring,
// modules, raw sockets, file handles, writes to /proc/sys and /sys) are
// internal/attacktest's lists, which the kube backend's escape tests
// range over too: an attack added there is tried on both.
//
// The tests need root (the backend does); they skip without it, except
// with CI=true, where a skip for lack of root or namespaces is a failure.
// Each attack runs both as the default sandbox user (uid 1000) and, where
// the identity matters, as root inside the sandbox (Spec.User "0": uid 0
// without capabilities), which only the kernel walls below stop.
//
// # Attacks and the layer that stops them
//
// Measured on Linux 6.18 (landlock ABI 7, cgroup v1 with a v2 mount):
//
//	attack                                         stopped by
//	---------------------------------------------  ------------------------------------------------
//	read a planted host file, /root, /etc/shadow   mount namespace + pivot_root (ENOENT: not there)
//	  ... through /proc/1/root, /proc/self/root    same (the sandbox's own root) / ptrace access (EACCES)
//	  ... by file handle (shocker)                 seccomp (EPERM on name_to_handle_at/open_by_handle_at)
//	  ... through links planted for ReadFile etc.  wsfs (resolution inside the workspace, no write via links)
//	write /, /usr, /etc, /bin, /lib, /var, ...     read-only root tmpfs and read-only binds (EROFS)
//	write the sandbox's /tmp, /dev/shm             allowed: private tmpfs, the host's /tmp unchanged
//	write, chmod, chown, rename, unlink, link,     read-only bind mount (EROFS; EXDEV for hard links);
//	  xattr, reopen via /proc/self/fd a RO mount   remount/umount/mount_setattr: seccomp (EPERM)
//	reach a listener on the host's 127.0.0.1/::1   network namespace (ECONNREFUSED: own loopback)
//	reach the host's other addresses, the internet network namespace (ENETUNREACH: no route)
//	reach a host abstract unix socket              network namespace (abstract sockets are per netns)
//	CONNECT/GET an unlisted host via the proxy     egress proxy (403, reported in Violations and logged)
//	exfiltrate through names under a wildcard      egress name bounds (403/429 past a burst, long
//	  (DNS queries the host makes for the sandbox)   labels refused, reported in Violations)
//	raw and packet sockets                         no CAP_NET_RAW (EPERM)
//	ptrace a sibling, the init, process_vm_readv   seccomp (EPERM)
//	mount, bind, pivot_root, chroot, new mount API seccomp (EPERM)
//	create a user (or any) namespace, setns        seccomp (EPERM; clone by flags, clone3 ENOSYS)
//	see host pids, kill/pidfd_open them            pid namespace (ESRCH); kill -1 reaches no host process
//	kill the init                                  landlock signal scope or uid (EPERM), or the kernel's
//	                                               rule that a namespace init ignores SIGKILL from inside
//	end the session by signalling its init as      landlock signal scope (EPERM) when the init's
//	  root inside (SIGTERM: Go's handler exits)      leader thread is outside the commands' domain;
//	                                               NOT STOPPED when it is the confined spawning
//	                                               thread (a self-DoS, not an escape): see
//	                                               TestSignallingTheInitFromInsideLeavesTheSessionRunning
//	read the host environment                      the init is started with an explicit environment
//	fork bomb                                      pids cgroup (EAGAIN at Resources.Pids)
//	memory bomb                                    memory cgroup (OOM kill, reported as OOMKilled)
//	fill the disk                                  ext4 image quota (ENOSPC), RLIMIT_FSIZE (EFBIG),
//	                                               sized /tmp and /dev/shm tmpfs (ENOSPC)
//	outlive the exec timeout (setsid, daemon,      per-command tracking cgroup, killed whole
//	  SIGTERM-ignorer, fork loop, stopped)
//	outlive the session timeout                    init exits; the pid namespace dies with it
//	setuid-root binary, file capabilities, su      no_new_privs, nosuid mounts, empty bounding set
//	capabilities, no_new_privs, seccomp mode       checked in /proc/self/status: 0, 1, 2
//	write /proc/sys, /proc/sysrq-trigger, /sys     read-only /proc binds (EROFS), no /sys (ENOENT)
//	lower oom_score_adj                            no CAP_SYS_RESOURCE (EACCES)
//	TIOCSTI into the session's terminal            seccomp (EPERM)
//	keyctl/add_key, bpf, io_uring, perf, uffd,     seccomp (EPERM)
//	  kexec, modules, reboot, clock, swap, syslog
//	block devices, mknod, /dev/mem, /dev/core      minimal /dev, no CAP_MKNOD, masked /proc/kcore
//	read another session's workspace or loopback   separate mount and network namespaces
//	use a descriptor the host process leaked       the init closes every inherited descriptor
//	  without close-on-exec (a host dir, a file)     (landlock alone stops openat below a leaked
//	                                               directory, but not getdents or writes to a file)
//	run or overwrite the host agentbox binary      landlock (EACCES: the host file is outside its
//	  through /proc/self/exe, /proc/1/exe            hierarchy); ptrace access checks on /proc/1
//	read a denied path (also via /proc/*/root,     empty read-only tmpfs / mode-000 file over it;
//	  umount, rename, rm, file handles)              umount and handles: seccomp (EPERM)
//	smuggle host files through a snapshot (links,  the snapshot store leaves out links that leave
//	  a FIFO to hang the saver)                      the root and special files
//	read a credential the proxy injects (env,      the credential stays in the proxy; response
//	  /proc, an upstream echoing it in headers)      headers carrying it back are dropped
//	flood the host with output                     per-stream cap (Resources.OutputBytes), drained
//	plant a symlink where a mount, a read-only     the init refuses a target that goes through a
//	  or a denied path goes (resolved pre-pivot)     symbolic link
//
// The test that first found the leaked-descriptor escape is
// TestInheritingAHostDescriptorFails; it plants a directory and a file
// descriptor without FD_CLOEXEC in the test process before a session
// starts.
package escapetest
