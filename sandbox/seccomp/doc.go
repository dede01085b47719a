// Package seccomp is agentbox's system-call policy: the calls a sandboxed
// command could use to break out of its namespaces or attack the host
// kernel (ptrace, mount and the new mount API, namespace creation, bpf,
// keyrings, kexec, module loading, userfaultfd, io_uring, perf_event_open,
// TIOCSTI, setuid modes, clock and reboot control, ...), refused with EPERM.
//
// The policy is data (policy.go) compiled to two forms from the same rules:
// a hand-written classic-BPF program for the native backend (Filter, loaded
// by Install) and a seccomp profile for the Docker backend (Profile). Both
// are built per architecture from system-call tables generated from
// golang.org/x/sys (zsyscalls.go, written by internal/gensyscalls).
//
// # Why a deny-list with default allow
//
// STYLE.md prefers allow-lists where the kernel surface is large. This
// filter is instead a deny-list of the dangerous set, on purpose: the
// sandbox runs arbitrary toolchains (compilers, git, python, node, package
// managers) whose system-call needs we do not control, and an allow-list
// that misses one call breaks a tool in ways that are hard to diagnose. The
// filter is one wall among several (namespaces, dropped capabilities,
// no_new_privs, landlock, cgroups), so it targets the calls that those other
// walls do not already neutralise or that expose large kernel attack
// surface. Two rules keep the deny-list from silently aging:
//
//   - every system call numbered above the newest one reviewed for this
//     list (see newestReviewed) is refused (ENOSYS from the filter, as on
//     an older kernel), so a syscall added to Linux later is refused until
//     someone reviews it;
//   - a foreign architecture (for example i386 through int 0x80 on x86_64)
//     kills the process, and x32 system calls on x86_64 fail with EPERM,
//     since their numbers would slip past a table written for the native ABI.
//
// # Usage
//
// The native backend loads the filter on its init's spawning thread, a
// locked OS thread from which every command is forked: the filter then
// applies to each command and everything it starts, while the init's other
// threads stay unfiltered. Install does exactly that for its caller: it
// filters the calling thread only (no SECCOMP_FILTER_FLAG_TSYNC) and keeps
// the goroutine on it. After Install the thread cannot itself create
// namespaces or use clone3 (it returns ENOSYS), so do all namespace set-up
// before. In Go that includes os/exec with SysProcAttr.UseCgroupFD (or
// CLONE_NEWTIME), which uses clone3 without a fallback; plain os/exec and
// syscall.ForkExec keep working (they use clone).
//
// Filter returns the program for inspection and tests; Denied lists what
// it blocks, for documentation and --help. Only linux/amd64 and
// linux/arm64 have tables; elsewhere Filter, Install and Profile return
// ErrPolicyUnsupported and the backend must refuse the identity policy
// part.
package seccomp
