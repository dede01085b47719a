package nsinit

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/agentbox/agentbox/sandbox/linux/control"
	"github.com/agentbox/agentbox/sandbox/seccomp"
	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// The confinement of commands is applied once, to the init's spawning
// thread, and inherited by every command forked from it: capability
// bounding/ambient/inheritable sets, no_new_privs, the seccomp filter and
// the landlock domain are all per-thread attributes that fork and execve
// carry over. This keeps exec in a live session at the price of a
// fork/exec (no intermediate stage process), and it keeps the rest of the
// init (which needs cgroup files, the control socket, signals) unfiltered.
// The thread is confined in two steps: dropPrivileges at once, while the
// init's main thread builds the root (nothing the spawning thread does
// needs a privilege or a filtered call), and restrictLandlock once the
// root is built, since its rules name paths in it.
//
// Both must run on a locked OS thread that is never unlocked.

// dropPrivileges empties the calling thread's capabilities but for the
// two its fork children need, sets no_new_privs and loads the seccomp
// filter.
func dropPrivileges() error {
	// Threat: a command regaining privilege. Every capability leaves the
	// bounding set (so exec of a setuid-root or file-capability binary, or
	// running as uid 0, yields none), the ambient and inheritable sets are
	// emptied, and only CAP_SETUID/CAP_SETGID stay effective on this
	// thread, for the fork child to switch to the session user; the switch
	// (or exec as root with an empty bounding set) drops them too.
	last, err := LastCap()
	if err != nil {
		return err
	}
	for c := 0; c <= last; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && err != unix.EINVAL {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	keep := uint32(1<<unix.CAP_SETUID | 1<<unix.CAP_SETGID)
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	data := [2]unix.CapUserData{{Effective: keep, Permitted: keep}}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("drop capabilities: %w", err)
	}
	// Threat: setuid binaries and file capabilities. no_new_privs makes
	// execve never grant privilege; it is also what landlock and seccomp
	// require of an unprivileged thread.
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("set no_new_privs: %w", err)
	}
	// The seccomp filter, on this thread only: the init's other threads
	// keep working unfiltered; the commands forked from this one inherit it.
	return seccomp.Install()
}

// LastCap is the highest capability number the kernel knows.
func LastCap() (int, error) {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return 0, fmt.Errorf("read cap_last_cap: %w", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("parse cap_last_cap: %w", err)
	}
	return n, nil
}

// Landlock access sets used by the rules below.
const (
	llRead = ll.AccessFSExecute | ll.AccessFSReadFile | ll.AccessFSReadDir
	llDev  = ll.AccessFSReadFile | ll.AccessFSWriteFile | ll.AccessFSReadDir | ll.AccessFSIoctlDev | ll.AccessFSTruncate
)

// landlockConfig is every filesystem right and IPC scope go-landlock
// knows, downgraded to what the kernel supports. Network rights are not
// handled: the netns already confines the network, and the egress proxy
// must stay reachable on loopback.
func landlockConfig() landlock.Config {
	return landlock.Config{HandledAccessFS: landlock.V11.HandledAccessFS, Scoped: landlock.V11.Scoped}.BestEffort()
}

// restrictLandlock is the second wall behind the mount layout: even if a
// command got around the read-only binds, it may write only below the
// workspace, /tmp, /dev/shm and read-write mounts (and to devices), and it
// may not signal or reach abstract sockets outside the sandbox.
func restrictLandlock(cfg *control.Config) (string, error) {
	abi, err := ll.LandlockGetABIVersion()
	if err != nil || abi < 1 {
		return "landlock unavailable on this kernel: not restricted (mount layout only)", nil
	}
	all := landlock.AccessFSSet(landlock.V11.HandledAccessFS)
	rw := []string{cfg.Workdir, "/tmp", "/dev/shm"}
	for _, m := range cfg.Mounts {
		if !m.ReadOnly {
			rw = append(rw, m.Target)
		}
	}
	rules := []landlock.Rule{
		landlock.PathAccess(llRead, "/"),
		landlock.PathAccess(llDev, "/dev"),
		landlock.PathAccess(all, rw...).IgnoreIfMissing(),
	}
	fd, flags, err := landlockConfig().NewRulesetFD(rules...)
	if err != nil {
		return "", fmt.Errorf("build landlock ruleset: %w", err)
	}
	if fd < 0 {
		return "landlock: nothing to restrict at this ABI", nil
	}
	defer unix.Close(fd)
	if err := ll.LandlockRestrictSelf(fd, flags); err != nil {
		return "", fmt.Errorf("landlock_restrict_self: %w", err)
	}
	return landlockSummary(abi), nil
}

// landlockSummary says what the kernel's landlock ABI restricts and what
// it does not, for the session's report.
func landlockSummary(abi int) string {
	var missing []string
	for _, m := range []struct {
		abi  int
		what string
	}{
		{2, "cross-directory rename and link (refer)"},
		{3, "file truncation"},
		{5, "device ioctls"},
		{6, "signals and abstract unix sockets leaving the sandbox"},
		{9, "connecting to named unix sockets"},
	} {
		if abi < m.abi {
			missing = append(missing, fmt.Sprintf("%s (needs ABI %d)", m.what, m.abi))
		}
	}
	s := fmt.Sprintf("landlock ABI %d: writes confined to the workspace, /tmp, /dev/shm and read-write mounts", abi)
	if len(missing) > 0 {
		s += "; not restricted at this ABI: " + strings.Join(missing, ", ")
	}
	return s
}
