package docker

import (
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/seccomp"
)

// initCmd is what a detached session's container runs as pid 1: a shell
// that only sleeps, and reaps the orphans the kernel gives it while it
// waits. Commands arrive through the exec API. It ignores every signal a
// command could send it, as the native init does: the kernel drops a
// signal sent from inside a pid namespace to its init unless the init
// handles it, and this shell handles none but SIGCHLD (docker-init,
// tini, which the engine would inject with Init, forwards SIGTERM and its
// kind to its child, so a command's kill -TERM 1 ended the session).
var initCmd = []string{"/bin/sh", "-c", "trap '' " + initIgnored + "; while :; do sleep 2147483647; done"}

// ownedInitCmd is initCmd for a session that belongs to the process that
// made it: its foreground child reads the container's standard input,
// which that process holds attached (its lifeline), and the init exits
// when it ends. The engine closes the input when the attachment goes
// (StdinOnce), which the kernel does when the process ends however it
// ends (a crash, SIGPIPE, kill -9), and removes the container
// (AutoRemove). A command that kills the reader gets another one; only
// the end of the input ends the loop.
var ownedInitCmd = []string{"/bin/sh", "-c", "trap '' " + initIgnored + "; until cat >/dev/null; do sleep 1; done"}

// initIgnored are the signals the init ignores explicitly (SIG_IGN), so
// that no handler the shell might install makes it killable: every
// catchable signal that ends or stops a process by default.
const initIgnored = "HUP INT QUIT ILL TRAP ABRT BUS FPE USR1 SEGV USR2 PIPE ALRM TERM TSTP TTIN TTOU XCPU XFSZ VTALRM PROF IO PWR SYS"

const (
	// tmpSize bounds the /tmp tmpfs, and shmSize /dev/shm (the engine's
	// default is its daemon's setting): whatever is written to either
	// is memory the session's limit counts, and with no memory limit
	// they are the bound.
	tmpSize = "256m"
	shmSize = 64 << 20
	// cpuShares is every session's share of the CPU under contention:
	// half a default container's (1024), as the native backend's cpu
	// weight 50, so that busy sandboxes leave the host's own work its
	// due even without --cpus.
	cpuShares = 512
	// commandOOMScore is the oom_score_adj every command starts with
	// (the wrapper raises its own before it execs the command), above
	// the init's 0: under memory pressure the OOM killer takes a command
	// before the init, whose end would end the session. A command may
	// lower its own back to the init's, not below (no CAP_SYS_RESOURCE).
	commandOOMScore = 500
)

// maskedPaths are what a sandbox has no need to read and an exploit or a
// fingerprint would: the engine's default masked paths (HostConfig's list
// replaces them), and what the native init masks besides (kernel memory
// layout, allocator state, the kernel's configuration, other users' key
// counts, the host's boot id). A file is covered by /dev/null, a
// directory by an empty read-only tmpfs; a path the kernel lacks is
// skipped.
var maskedPaths = []string{
	// The engine's defaults.
	"/proc/asound", "/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
	"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware",
	// What the native init masks besides.
	"/proc/key-users", "/proc/config.gz", "/proc/kmsg", "/proc/kallsyms",
	"/proc/slabinfo", "/proc/kpageflags", "/proc/kpagecount", "/proc/kpagecgroup",
	"/proc/vmallocinfo", "/proc/pagetypeinfo", "/proc/iomem", "/proc/ioports",
	"/proc/sys/kernel/random/boot_id",
}

// identity is the uid:gid commands run as.
type identity struct{ uid, gid int }

func (id identity) String() string { return strconv.Itoa(id.uid) + ":" + strconv.Itoa(id.gid) }

// baseEnv is the environment every command gets before Spec.Env: the
// host's is never passed. HOME is /tmp because the root is read-only.
func baseEnv(workdir string) map[string]string {
	return map[string]string{
		"PATH":   "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME":   "/tmp",
		"TMPDIR": "/tmp",
		"LANG":   "C.UTF-8",
		"PWD":    workdir,
	}
}

func envList(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k+"="+m[k])
	}
	return out
}

// containerPlan is everything ContainerCreate needs for one session, and
// what its binds must be once it runs.
type containerPlan struct {
	config *container.Config
	host   *container.HostConfig
	binds  map[string]fileID
}

// seccompProfile is the system-call policy that the native backend
// compiles to BPF, as a profile for the engine's architecture.
func (c *Client) seccompProfile() (string, error) {
	b, err := seccomp.Profile(c.engine.arch)
	return string(b), err
}

// hostCounted are calls that spend a per-user count of the host's user
// namespace, which a session running as uid 0 shares with host root's
// daemons (see sessionProfile).
var hostCounted = []string{"inotify_init", "inotify_init1"}

// sessionProfile is the profile for a session whose commands run as who.
// One running as uid 0 (the owner of a root-owned workspace) is host uid
// 0, whose per-user kernel counts it would share with the host's root
// daemons; the one it could exhaust from inside in a few calls is
// inotify's (128 instances by default: systemd, dockerd and tail -f then
// get EMFILE), so such a session gets no inotify instance at all
// (inotify_init and inotify_init1 fail with ENOSYS; tools fall back to
// polling).
func (c *Client) sessionProfile(who identity) (string, error) {
	if who.uid != 0 {
		return c.seccompProfile()
	}
	b, err := seccomp.Profile(c.engine.arch, hostCounted...)
	return string(b), err
}

// engineGOARCH maps the machine name an engine reports (uname -m) to the
// GOARCH the seccomp policy is compiled for; an unknown name passes
// through, and Profile then refuses it.
func engineGOARCH(machine string) string {
	switch machine {
	case "x86_64":
		return "amd64"
	case "aarch64":
		return "arm64"
	}
	return machine
}

// planContainer maps a spec (already checked against Enforces) onto a
// container: the image's root read-only, the workspace bound read-write
// at the workdir, /tmp a tmpfs, no capabilities, no new privileges, the
// seccomp profile, network none, cgroup limits, the session user.
func (c *Client) planContainer(id string, spec sandbox.Spec, b *bindSet, who identity, seccompJSON string, env map[string]string) (containerPlan, error) {
	workdir := spec.Workdir
	r := spec.Policy.Resources
	init := initCmd
	if !spec.Detached {
		init = ownedInitCmd
	}
	cfg := &container.Config{
		Image:      spec.Image,
		Entrypoint: init[:1],
		Cmd:        init[1:],
		User:       who.String(),
		WorkingDir: workdir,
		Env:        envList(env),
		Labels: map[string]string{
			labelSession:   id,
			labelOwnerPID:  strconv.Itoa(os.Getpid()),
			labelOwnerHost: hostname(),
			labelCreated:   time.Now().UTC().Format(time.RFC3339),
		},
		NetworkDisabled: spec.Policy.Network.EffectiveMode() == sandbox.NetworkNone,
		Hostname:        "agentbox",
	}
	for k, v := range spec.Labels {
		cfg.Labels["agentbox.label."+k] = v
	}
	if spec.Detached {
		cfg.Labels[labelDetached] = "true"
	} else {
		// The lifeline (see ownedInitCmd): the init's input, held
		// attached by this process, closed by the engine when it goes.
		cfg.OpenStdin, cfg.StdinOnce, cfg.AttachStdin = true, true, true
	}
	noInit := false // the init is initCmd's shell itself, not docker-init
	hc := &container.HostConfig{
		NetworkMode:    "none",
		ReadonlyRootfs: true,
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges:true"},
		Init:           &noInit,
		IpcMode:        "private",
		ShmSize:        shmSize,
		MaskedPaths:    maskedPaths,
		// A session of a process ends with it: the engine removes its
		// container once the init exits.
		AutoRemove: !spec.Detached,
		Tmpfs: map[string]string{
			"/tmp": "rw,nosuid,nodev,size=" + tmpSize + ",mode=1777",
		},
		Mounts: []mount.Mount{{
			Type: mount.TypeBind, Source: b.ws.Name, Target: workdir,
			BindOptions: &mount.BindOptions{Propagation: mount.PropagationRPrivate},
		}},
	}
	if seccompJSON != "" {
		hc.SecurityOpt = append(hc.SecurityOpt, "seccomp="+seccompJSON)
	}
	switch spec.Policy.Network.EffectiveMode() {
	case sandbox.NetworkHost:
		hc.NetworkMode = "host"
	case sandbox.NetworkAllowList:
		hc.NetworkMode = "" // set by the egress attachment
	}
	if r.MemoryBytes > 0 {
		hc.Memory = r.MemoryBytes
		hc.MemorySwap = r.MemoryBytes // no swap beyond the limit
	}
	if r.Pids > 0 {
		p := r.Pids
		hc.PidsLimit = &p
	}
	if r.CPUs > 0 {
		hc.NanoCPUs = int64(r.CPUs * 1e9)
	}
	if c.engine.cpuShares {
		hc.CPUShares = cpuShares
	}
	b.expect(workdir, b.ws)
	for i, m := range spec.Mounts {
		if err := sandbox.ValidateMountTarget(workdir, m.Target); err != nil {
			return containerPlan{}, err
		}
		// The source as it was held: a path with a link in it is bound
		// where the link led when agentbox opened it.
		hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeBind, Source: b.mounts[i].Name, Target: path.Clean(m.Target), ReadOnly: m.ReadOnly})
		b.expect(m.Target, b.mounts[i])
	}
	if err := planReadOnly(hc, spec, b); err != nil {
		return containerPlan{}, err
	}
	if err := planDeny(hc, spec, b.ws.Name); err != nil {
		return containerPlan{}, err
	}
	return containerPlan{config: cfg, host: hc, binds: b.want}, nil
}

// hostSource maps a sandbox path to the host path it is bound from (the
// workspace or a Mount), or "" when it lies in the image's root or /tmp.
func hostSource(spec sandbox.Spec, workspace, p string) (src string, writable bool, err error) {
	src, _, _, writable, err = hostSourceIn(spec, workspace, p)
	return src, writable, err
}

// hostSourceIn is hostSource that also says the bound directory the
// source lies in and the source's path relative to it.
func hostSourceIn(spec sandbox.Spec, workspace, p string) (src, base, rel string, writable bool, err error) {
	p = path.Clean(p)
	best, bestLen := "", -1
	consider := func(target, source string, rw bool) {
		if p == target || strings.HasPrefix(p, strings.TrimSuffix(target, "/")+"/") {
			if len(target) > bestLen {
				rel = strings.TrimPrefix(strings.TrimPrefix(p, target), "/")
				best, base, bestLen, writable = filepath.Join(source, filepath.FromSlash(rel)), source, len(target), rw
			}
		}
	}
	consider(spec.Workdir, workspace, true)
	for _, m := range spec.Mounts {
		consider(path.Clean(m.Target), m.Source, !m.ReadOnly)
	}
	if best != "" {
		if err := noSymlinkBelow(base, best); err != nil {
			return "", "", "", false, sandbox.Wrap("docker: policy path "+p, sandbox.ErrPathEscape, err)
		}
	}
	return best, base, rel, writable, nil
}

// noSymlinkBelow checks that no component of target below base is a
// symlink. Threat: the engine resolves a bind source on the host, so a
// link the sandbox (or an earlier session) left in the workspace, such as
// in -> /root, would bind that host directory into the container under a
// read-only or deny path.
func noSymlinkBelow(base, target string) error {
	rel, err := filepath.Rel(base, target)
	if err != nil || rel == "." {
		return err
	}
	cur := base
	for _, c := range strings.Split(rel, string(filepath.Separator)) {
		cur = filepath.Join(cur, c)
		fi, err := os.Lstat(cur)
		if os.IsNotExist(err) {
			return nil // created below as a plain directory
		}
		if err != nil {
			return err
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			return fmt.Errorf("%s is a symlink; a policy path may not go through one", cur)
		}
	}
	return nil
}

// planReadOnly makes each Filesystem.ReadOnly path read-only. Paths in the
// workspace or a writable mount get a read-only bind of themselves over
// themselves (the kernel refuses writes, whatever the permissions), held
// and checked like every bind (a missing one is made, owned like its
// parent); /tmp cannot hold a read-only path; the rest of the root is
// read-only already.
func planReadOnly(hc *container.HostConfig, spec sandbox.Spec, b *bindSet) error {
	for _, p := range spec.Policy.Filesystem.ReadOnly {
		p = path.Clean(p)
		if p == "/tmp" || strings.HasPrefix(p, "/tmp/") {
			return sandbox.Errorf(sandbox.ErrPolicyUnsupported, "docker: read-only path %s is inside the /tmp tmpfs (name a path in the workspace or a mount)", p)
		}
		_, base, rel, rw, err := hostSourceIn(spec, b.ws.Name, p)
		if err != nil {
			return err
		}
		if base == "" || !rw {
			continue // image root or a read-only mount: read-only already
		}
		held, err := pinBelow(b.base(spec, base), rel)
		if err != nil {
			return err
		}
		held.Close()
		hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeBind, Source: held.Name, Target: p, ReadOnly: true})
		b.expect(p, held)
	}
	return nil
}

// planDeny hides each Filesystem.Deny path: a directory (or a path that
// does not exist) is covered by an empty read-only tmpfs with mode 000, a
// file by a read-only bind of /dev/null.
func planDeny(hc *container.HostConfig, spec sandbox.Spec, workspace string) error {
	for _, p := range spec.Policy.Filesystem.Deny {
		p = path.Clean(p)
		if p == "/" || p == spec.Workdir {
			return sandbox.Errorf(sandbox.ErrInvalid, "docker: cannot deny %s: it is the root of the sandbox layout", p)
		}
		src, _, err := hostSource(spec, workspace, p)
		if err != nil {
			return err
		}
		if src != "" {
			if fi, err := os.Lstat(src); err == nil && !fi.IsDir() {
				hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeBind, Source: "/dev/null", Target: p, ReadOnly: true})
				continue
			}
		}
		// An explicit mode 000: the engine's default tmpfs mode is 1777.
		hc.Tmpfs[p] = "ro,nosuid,nodev,noexec,size=4k,mode=000"
	}
	return nil
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return "unknown"
	}
	return h
}

// describeMounts is a one-line summary for debug logs.
func describeMounts(hc *container.HostConfig) string {
	var b strings.Builder
	for _, m := range hc.Mounts {
		fmt.Fprintf(&b, "%s:%s(%s,ro=%t) ", m.Source, m.Target, m.Type, m.ReadOnly)
	}
	return b.String()
}
