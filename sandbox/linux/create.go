package linux

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/linux/cgroups"
	"golang.org/x/sys/unix"
)

// Defaults for limits that always exist.
const (
	defaultTmpBytes = 256 << 20
	defaultFileSize = 8 << 30
	defaultNoFile   = 4096
	startTimeout    = 10 * time.Second
)

// undo is a stack of clean-up steps run in reverse on failure.
type undo []func()

func (u *undo) push(f func()) { *u = append(*u, f) }
func (u *undo) run() {
	for i := len(*u) - 1; i >= 0; i-- {
		(*u)[i]()
	}
	*u = nil
}

// Create checks the policy, then builds the session: state directory,
// workspace (fresh, seeded from a snapshot, or on a size-limited image),
// cgroup, init, and the egress proxy. On any failure, everything made so
// far is removed.
func (c *Client) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Session, error) {
	s, err := c.create(ctx, spec, c.newID(), false)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// create builds a session; adopt makes it own (and later remove) an
// existing spec.Workspace, for a session rebuilt on its own workspace.
func (c *Client) create(ctx context.Context, spec sandbox.Spec, id string, adopt bool) (_ *session, err error) {
	const op = "linux: create"
	weakened, err := sandbox.Check(c.Name(), c.Enforces(), spec.Policy, spec.AllowWeaker, c.log)
	if err != nil {
		return nil, err
	}
	// What the caller let go (AllowWeaker) is not attempted.
	for _, p := range weakened {
		switch p {
		case sandbox.PartMemory:
			spec.Policy.Resources.MemoryBytes = 0
		case sandbox.PartPids:
			spec.Policy.Resources.Pids = 0
		case sandbox.PartCPU:
			spec.Policy.Resources.CPUs = 0
		case sandbox.PartDisk:
			spec.Policy.Resources.DiskBytes = 0
		case sandbox.PartNetworkAllowList:
			// A build without the proxy (noegress): the listed hosts stay
			// out of reach too, the safe side of what was allowed.
			spec.Policy.Network = sandbox.NetworkPolicy{Mode: sandbox.NetworkNone}
		}
	}
	uid, gid, err := parseUser(spec.User)
	if err != nil {
		return nil, err
	}
	if err := c.checkSpec(&spec); err != nil {
		return nil, err
	}
	var u undo
	var child *initChild
	defer func() {
		if err != nil {
			if child != nil {
				child.kill() // first: the init may hold what the undo removes
			}
			u.run()
		}
	}()
	dir := c.sessionDir(id)
	if err := os.MkdirAll(c.opts.StateDir, 0o700); err != nil {
		return nil, sandbox.Wrap(op, nil, fmt.Errorf("create state directory %s: %w", c.opts.StateDir, err))
	}
	st := sandbox.State{
		Version: sandbox.StateVersion, Backend: c.Name(), ID: id, Spec: spec,
		Handles: map[string]string{"state_dir": dir}, CreatedAt: time.Now().UTC(),
	}
	ws := spec.Workspace
	if ws == "" {
		ws = filepath.Join(c.opts.StateDir, id+".workspace")
	}
	cfg := &initConfig{Rootless: c.rootless,
		ID: id, Root: dir, Workspace: ws, Workdir: workdirOf(spec),
		Mounts: spec.Mounts, ReadOnly: spec.Policy.Filesystem.ReadOnly, Deny: spec.Policy.Filesystem.Deny,
		UID: uid, GID: gid, Network: spec.Policy.Network.EffectiveMode(),
		TmpBytes: defaultTmpBytes, FileSize: defaultFileSize, NoFile: defaultNoFile,
	}
	if d := spec.Policy.Resources.DiskBytes; d > 0 {
		cfg.FileSize = d
		cfg.TmpBytes = min(d, defaultTmpBytes)
	}
	cfg.SessionTimeout = int64(spec.Policy.Resources.SessionTimeout)

	// The host side is set up while the init starts (its Go runtime's
	// start is the longest step of a session start): the init gets its
	// descriptors with its config. What mounts on the host (a disk
	// quota's image) or takes long (a snapshot's restore) is done before
	// the init exists, whose mount namespace is a copy of the host's at
	// its start.
	late := spec.Policy.Resources.DiskBytes == 0 && spec.Snapshot == ""
	if !late {
		if err := c.prepareHost(ctx, &st, &u, spec, ws, uid, gid, adopt); err != nil {
			return nil, err
		}
	}
	g, err := c.cg.Create(id, cgroups.Limits{
		MemoryBytes: spec.Policy.Resources.MemoryBytes,
		Pids:        spec.Policy.Resources.Pids,
		CPUs:        spec.Policy.Resources.CPUs,
	})
	if err != nil {
		return nil, sandbox.Wrap(op, nil, err)
	}
	u.push(func() { _ = g.Remove() })
	// The first session's network namespace may be in the making already
	// (Options.FirstSession): taken only now, so that a spec refused
	// above leaves it to the next Create.
	var nt *netThread
	if cfg.Network != sandbox.NetworkHost {
		c.firstMu.Lock()
		nt, c.firstNet = c.firstNet, nil
		c.firstMu.Unlock()
		if nt != nil {
			defer nt.release()
		}
	}
	l, err := c.launchInit(cfg, g, nt)
	if err != nil {
		return nil, sandbox.Wrap(op, nil, err)
	}
	defer l.close()
	child = l.child
	pid := child.pid
	if late {
		if err := c.prepareHost(ctx, &st, &u, spec, ws, uid, gid, adopt); err != nil {
			return nil, err
		}
	}
	if made := recordMadeDirs(ws, cfg); len(made) > 0 {
		b, err := json.Marshal(made)
		if err != nil {
			return nil, sandbox.Wrap(op, nil, err)
		}
		st.Handles[madeDirsHandle] = string(b)
		u.push(func() { _ = removeMadeDirs(made) }) // after the init is killed
	}
	if t := spec.Policy.Resources.SessionTimeout; t > 0 {
		st.Handles["deadline"] = strconv.FormatInt(time.Now().Add(t).UnixNano(), 10)
	}
	st.Handles["socket"] = filepath.Join(dir, "control.sock")
	st.Handles["init_pid"] = strconv.Itoa(pid)
	// state.json is written while the init builds the sandbox, off the
	// path of the start, and names the init from its first moment (so
	// that Delete finds it should this process die now). It lacks only
	// the landlock report, which Resume asks the init for.
	early := st
	early.Handles = maps.Clone(st.Handles)
	saved := make(chan error, 1)
	go func() { saved <- writeState(dir, early) }()
	report, spare, err := l.configure(ctx, dir, cfg)
	// Waited for even on failure: the undo removes the directory.
	if serr := <-saved; serr != nil && err == nil {
		err = serr
	}
	if err != nil {
		return nil, sandbox.Wrap(op, nil, err)
	}
	st.Handles["landlock"] = report

	s := newSession(c, st, g)
	s.child = child
	s.spare = spare
	if spec.Policy.Network.EffectiveMode() == sandbox.NetworkAllowList {
		if err := s.startEgress(spec.Policy.Network); err != nil {
			return nil, sandbox.Wrap(op, nil, err)
		}
		if err := s.saveState(); err != nil { // with the proxy's port
			s.stopEgress()
			return nil, sandbox.Wrap(op, nil, err)
		}
	}
	c.log.Debug("linux session started", "id", id, "init_pid", pid, "landlock", report, "limits", strings.Join(g.Enforced(), "; "))
	return s, nil
}

// prepareHost makes the session directory and the workspace (fresh, on a
// size-limited image, or seeded from a snapshot), each with its undo.
func (c *Client) prepareHost(ctx context.Context, st *sandbox.State, u *undo, spec sandbox.Spec, ws string, uid, gid int, adopt bool) error {
	const op = "linux: create"
	dir := st.Handles["state_dir"]
	if err := os.Mkdir(dir, 0o700); err != nil {
		return sandbox.Wrap(op, nil, fmt.Errorf("create session directory %s: %w", dir, err))
	}
	u.push(func() { _ = os.RemoveAll(dir) })
	if spec.Workspace == "" {
		if err := os.Mkdir(ws, 0o755); err != nil {
			return sandbox.Wrap(op, nil, fmt.Errorf("create workspace: %w", err))
		}
		u.push(func() { _ = os.RemoveAll(ws) })
		st.OwnsWorkspace = true
		if spec.Policy.Resources.DiskBytes > 0 {
			img := filepath.Join(dir, "disk.img")
			if err := mountDisk(ctx, img, ws, spec.Policy.Resources.DiskBytes, uid, gid); err != nil {
				return sandbox.Wrap(op, nil, err)
			}
			st.Handles["disk_image"] = img
			u.push(func() { unmountDisk(ws) })
		}
		if c.rootless {
			// Already the sandbox user's: rootless, that user is us.
		} else if err := os.Chown(ws, uid, gid); err != nil {
			return sandbox.Wrap(op, nil, fmt.Errorf("give the workspace to %d:%d: %w", uid, gid, err))
		}
	}
	if spec.Snapshot != "" {
		if err := c.restore(ctx, spec.Snapshot, ws); err != nil {
			return err
		}
		st.Snapshot = spec.Snapshot
	}
	st.Workspace = ws
	if adopt {
		st.OwnsWorkspace = true
		st.Spec.Workspace = ""
	}
	return nil
}

// checkSpec refuses what this backend cannot do with a spec, before
// anything is started.
func (c *Client) checkSpec(spec *sandbox.Spec) error {
	const op = "linux: create"
	if spec.Policy.Network.EffectiveMode() == sandbox.NetworkHost {
		if !spec.AllowWeaker {
			return &sandbox.Error{Op: op, Kind: sandbox.ErrPolicyUnsupported,
				Err: errors.New("network host shares the host's network: not confinement (pass --allow-weaker to run so)")}
		}
		c.log.Warn("policy part NOT enforced (allowed weaker)", "backend", c.Name(), "part", "network (host network shared)")
	}
	if spec.Workspace != "" {
		if !filepath.IsAbs(spec.Workspace) {
			return sandbox.Errorf(sandbox.ErrInvalid, "linux: workspace %q must be an absolute host path", spec.Workspace)
		}
		fi, err := os.Stat(spec.Workspace)
		if err != nil {
			return sandbox.Wrap(op, sandbox.ErrNotFound, fmt.Errorf("workspace %s: %w", spec.Workspace, err))
		}
		if !fi.IsDir() {
			return sandbox.Errorf(sandbox.ErrInvalid, "linux: workspace %s is not a directory", spec.Workspace)
		}
		if spec.Policy.Resources.DiskBytes > 0 {
			return &sandbox.Error{Op: op, Kind: sandbox.ErrPolicyUnsupported, Err: fmt.Errorf(
				"%s: a disk quota needs a workspace the session creates (an ext4 image); it cannot be put on the existing directory %s", sandbox.PartDisk, spec.Workspace)}
		}
	}
	wd := workdirOf(*spec)
	if !path.IsAbs(wd) || path.Clean(wd) != wd || wd == "/" {
		return sandbox.Errorf(sandbox.ErrInvalid, "linux: workdir %q must be a clean absolute path other than /", wd)
	}
	// Under a tool directory (a read-only bind) the workspace could not
	// be mounted, and it would hide /etc, /dev, /proc or /tmp.
	for _, top := range append(slices.Clone(toolDirs), "/etc", "/dev", "/proc", "/tmp") {
		if wd == top || strings.HasPrefix(wd, top+"/") {
			return sandbox.Errorf(sandbox.ErrInvalid, "linux: workdir %s would hide the sandbox's %s", wd, top)
		}
	}
	for _, p := range spec.Policy.Filesystem.Deny {
		if p := path.Clean(p); p == "/" || p == wd {
			return sandbox.Errorf(sandbox.ErrInvalid, "linux: cannot deny %s: it is the root of the sandbox layout", p)
		}
	}
	// Threat: the control sockets live in the state directory; one bound
	// into a sandbox (even read-only: connecting needs no write to the
	// file system) would let its commands drive other sessions.
	sources := []string{spec.Workspace}
	for _, m := range spec.Mounts {
		sources = append(sources, m.Source)
	}
	for _, src := range sources {
		if src != "" && containsPath(src, c.opts.StateDir) {
			return sandbox.Errorf(sandbox.ErrInvalid, "linux: %s holds the sessions' state directory %s (their control sockets); it cannot be bound into a sandbox", src, c.opts.StateDir)
		}
	}
	for _, m := range spec.Mounts {
		if err := sandbox.ValidateMountTarget(wd, m.Target); err != nil {
			return err
		}
		if !filepath.IsAbs(m.Source) {
			return sandbox.Errorf(sandbox.ErrInvalid, "linux: mount source %q must be an absolute host path", m.Source)
		}
		if _, err := os.Stat(m.Source); err != nil {
			return sandbox.Wrap(op, sandbox.ErrNotFound, fmt.Errorf("mount source %s: %w", m.Source, err))
		}
	}
	return nil
}

// madeDirsHandle is the State handle listing, as JSON, the madeDirs of
// a session, for release to remove.
const madeDirsHandle = "deny_mount_points"

// madeDir is a host directory the init may make as the mount point of a
// missing denied path (see coverMissing): Rel under Base, the workspace
// or a read-write mount's source.
type madeDir struct {
	Base string `json:"base"`
	Rel  string `json:"rel"`
	// Dev and Ino identify Base as it was at create time. Threat: a
	// read-write mount's source may lie inside the workspace, where the
	// command can rename it and put a link (to a host directory) or
	// another directory in its place; release must not follow.
	Dev uint64 `json:"dev,omitempty"`
	Ino uint64 `json:"ino,omitempty"`
}

// recordMadeDirs lists, before the init starts, the host directories it
// would make for the denied paths that are missing under the workspace or
// a read-write mount, deepest first, so that the session can remove them
// when it ends instead of leaving empty directories in the user's tree.
// Only what is missing now is listed: a directory that was there before
// the session is never the session's to remove. Paths the init would
// refuse (under a read-only mount or policy path, through a link or a
// file) or leave to another denied path's mask make nothing and are left
// out.
func recordMadeDirs(ws string, cfg *initConfig) []madeDir {
	type layer struct {
		target, source string
		readOnly       bool
	}
	layers := []layer{{cfg.Workdir, ws, false}}
	for _, m := range cfg.Mounts {
		layers = append(layers, layer{path.Clean(m.Target), m.Source, m.ReadOnly})
	}
	var out []madeDir
	seen := map[madeDir]bool{}
	for _, p := range cfg.Deny {
		p = path.Clean("/" + p)
		if underDenied(p, cfg.Deny) || within(p, cfg.ReadOnly) {
			continue
		}
		// The layer the sandbox sees at p is the deepest mount holding
		// it, the last one of equal depth (mounts stack in order).
		var top *layer
		for i := range layers {
			l := &layers[i]
			if within(p, []string{l.target}) && (top == nil || len(l.target) >= len(top.target)) {
				top = l
			}
		}
		if top == nil || top.readOnly || p == top.target {
			continue
		}
		parts := strings.Split(strings.TrimPrefix(p, top.target+"/"), "/")
		for i := range parts {
			fi, err := os.Lstat(filepath.Join(top.source, filepath.Join(parts[:i+1]...)))
			if err == nil && fi.IsDir() {
				continue
			}
			if errors.Is(err, os.ErrNotExist) {
				for j := len(parts); j > i; j-- {
					d := madeDir{Base: top.source, Rel: filepath.Join(parts[:j]...)}
					var st unix.Stat_t
					if unix.Stat(top.source, &st) == nil {
						d.Dev, d.Ino = st.Dev, st.Ino
					}
					if !seen[d] {
						seen[d] = true
						out = append(out, d)
					}
				}
			}
			break // made from here down, or refused by the init
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		return strings.Count(out[i].Rel, "/") > strings.Count(out[j].Rel, "/")
	})
	return out
}

// within reports whether the clean sandbox path p is one of dirs or lies
// inside one.
func within(p string, dirs []string) bool {
	for _, d := range dirs {
		d = path.Clean("/" + d)
		if p == d || strings.HasPrefix(p, d+"/") || d == "/" {
			return true
		}
	}
	return false
}

// restore seeds dir from a snapshot.
func (c *Client) restore(ctx context.Context, ref, dir string) error {
	if c.opts.Snapshots == nil {
		return sandbox.Errorf(sandbox.ErrInvalid, "linux: spec names snapshot %s but the client has no snapshot store", ref)
	}
	if err := c.opts.Snapshots.Restore(ctx, ref, dir); err != nil {
		return sandbox.Wrap("linux: restore snapshot "+ref, nil, err)
	}
	return nil
}

func workdirOf(spec sandbox.Spec) string {
	if spec.Workdir == "" {
		return sandbox.DefaultWorkdir
	}
	return spec.Workdir
}

// parseUser reads "uid[:gid]"; the default is the unprivileged sandbox
// user. A missing gid is the uid.
func parseUser(s string) (int, int, error) {
	if s == "" {
		return sandbox.DefaultUID, sandbox.DefaultGID, nil
	}
	us, gs, hasGID := strings.Cut(s, ":")
	uid, err := strconv.ParseUint(us, 10, 31)
	if err != nil {
		return 0, 0, sandbox.Errorf(sandbox.ErrInvalid, "linux: user %q: uid must be a number", s)
	}
	gid := uid
	if hasGID {
		if gid, err = strconv.ParseUint(gs, 10, 31); err != nil {
			return 0, 0, sandbox.Errorf(sandbox.ErrInvalid, "linux: user %q: gid must be a number", s)
		}
	}
	return int(uid), int(gid), nil
}

// launched is an init started but not yet configured: it boots while
// the host side is set up, then gets its config, control socket and log.
type launched struct {
	child *initChild
	setup *net.UnixConn
	// early is what the init wrote to stdout and stderr before it had its
	// log (a Go runtime's crash, say), read until the init replaces them.
	early chan []byte
}

func (l *launched) close() { _ = l.setup.Close() }

// launchInit re-executes the agentbox binary (or agentbox-init) as the
// session's init in new namespaces, born in the session's cgroup2 group.
// It holds the setup socket pair's end and the session's group
// directories (the spawning thread joins them at once); the number of
// the control socket configure sends is held by a placeholder, so that
// nothing else in the init takes it.
func (c *Client) launchInit(cfg *initConfig, g *cgroups.Group, nt *netThread) (*launched, error) {
	args := initArgs{ID: cfg.ID, Join: len(g.ThreadDirs())}
	trackDir, thread := g.Tracking()
	if trackDir != "" {
		args.Tracking = "v2"
		if thread {
			args.Tracking = "v1"
		}
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("setup socket pair: %w", err)
	}
	parentEnd := os.NewFile(uintptr(pair[0]), "setup")
	childEnd := os.NewFile(uintptr(pair[1]), "setup-init")
	defer parentEnd.Close()
	defer childEnd.Close()
	placeholder, err := os.Open(os.DevNull)
	if err != nil {
		return nil, err
	}
	defer placeholder.Close()
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer outW.Close()
	// stdin, stdout, stderr, then fdSetup, fdControl, fdTracking (a
	// placeholder when there is no tracking group) and the join
	// directories from fdJoinFirst.
	track := placeholder
	if trackDir != "" {
		if track, err = os.Open(trackDir); err != nil {
			outR.Close()
			return nil, fmt.Errorf("open tracking group %s: %w", trackDir, err)
		}
		defer track.Close()
	}
	files := []uintptr{placeholder.Fd(), outW.Fd(), outW.Fd(), childEnd.Fd(), placeholder.Fd(), track.Fd()}
	for _, d := range g.ThreadDirs() {
		f, err := os.Open(d)
		if err != nil {
			outR.Close()
			return nil, fmt.Errorf("open group %s: %w", d, err)
		}
		defer f.Close()
		files = append(files, f.Fd())
	}

	flags := uintptr(unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP)
	if cfg.Network != sandbox.NetworkHost {
		flags |= unix.CLONE_NEWNET
	}
	sys := &syscall.SysProcAttr{Cloneflags: flags, Setsid: true}
	if cfg.Rootless {
		// A user namespace of the session's own in which the sandbox
		// user is the only id and maps to ours (an unprivileged map can
		// name no other). The init runs as that user, not as root, and
		// keeps the capabilities it needs to build the sandbox (over its
		// own namespaces only) as ambient ones across its execve; the
		// spawning thread drops them all, as it does as root.
		sys.Cloneflags |= unix.CLONE_NEWUSER
		sys.UidMappings = []syscall.SysProcIDMap{{ContainerID: cfg.UID, HostID: os.Geteuid(), Size: 1}}
		sys.GidMappings = []syscall.SysProcIDMap{{ContainerID: cfg.GID, HostID: os.Getegid(), Size: 1}}
		last, err := lastCap() // this kernel's, not the headers': an unknown one cannot be raised
		if err != nil {
			outR.Close()
			return nil, fmt.Errorf("rootless: %w", err)
		}
		for c := uintptr(0); c <= uintptr(last); c++ {
			sys.AmbientCaps = append(sys.AmbientCaps, c)
		}
	}
	// The init joins the cgroup2 group whole, born in it (clone3 with
	// CLONE_INTO_CGROUP: no migration of a running process, which costs
	// an RCU grace period); on v1 only its spawning thread joins the
	// limits (see cgroups.Group.ThreadDirs), so the init's own threads
	// neither use up pids.max nor are OOM candidates.
	if v2 := g.Dir("v2"); v2 != "" {
		if gf, err := os.Open(v2); err == nil {
			defer gf.Close()
			sys.UseCgroupFD = true
			sys.CgroupFD = int(gf.Fd())
		}
	}
	// syscall.ForkExec, not os/exec: the os package probes once per
	// process that pidfds work by forking a child of its own, ~0.1 ms
	// of every CLI run. The pidfd comes with the clone (CLONE_PIDFD);
	// a kernel before 5.2 leaves it -1, and one before 5.4 cannot wait
	// on it: initChild then waits by pid (see reapPidfd).
	pidfd := -1
	sys.PidFD = &pidfd
	attr := &syscall.ProcAttr{Dir: "/", Env: []string{"GOMAXPROCS=2", "GOGC=50"}, Files: files, Sys: sys}
	argv := append([]string{initMarker}, args.argv()...)
	var pid int
	start := func() {
		pid, err = syscall.ForkExec(c.exe, argv, attr)
		if err != nil && sys.UseCgroupFD {
			// Kernels before 5.7 have no clone3 into a cgroup: move it after.
			sys.UseCgroupFD = false
			pid, err = syscall.ForkExec(c.exe, argv, attr)
		}
	}
	if nt != nil && sys.Cloneflags&unix.CLONE_NEWNET != 0 {
		nt.fork(func(made bool) {
			if made {
				sys.Cloneflags &^= unix.CLONE_NEWNET // born in the thread's
			}
			start()
		})
	} else {
		start()
	}
	outW.Close()
	if err != nil {
		outR.Close()
		return nil, fmt.Errorf("start init %s: %w", c.exe, err)
	}
	l := &launched{child: newInitChild(pid, pidfd), early: make(chan []byte, 1)}
	go func() {
		b, _ := io.ReadAll(io.LimitReader(outR, 4<<10))
		outR.Close()
		l.early <- b
	}()
	conn, err := net.FileConn(parentEnd)
	if err != nil {
		l.child.kill()
		return nil, fmt.Errorf("setup socket: %w", err)
	}
	l.setup = conn.(*net.UnixConn)
	if !sys.UseCgroupFD {
		if err := g.AddV2(pid); err != nil {
			l.child.kill()
			l.close()
			return nil, err
		}
	}
	return l, nil
}

// configure gives the launched init its control socket and log with its
// config, and waits until it serves (or says why it cannot). It returns
// the landlock report and a control connection for the first command.
func (l *launched) configure(ctx context.Context, dir string, cfg *initConfig) (_ string, _ *net.UnixConn, err error) {
	sockPath := filepath.Join(dir, "control.sock")
	ln, err := listenControl(sockPath)
	if err != nil {
		return "", nil, fmt.Errorf("listen on %s: %w", sockPath, err)
	}
	ln.SetUnlinkOnClose(false)
	lnFile, err := ln.File()
	ln.Close()
	if err != nil {
		return "", nil, fmt.Errorf("control socket file: %w", err)
	}
	defer lnFile.Close()
	logf, err := os.OpenFile(filepath.Join(dir, "init.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return "", nil, fmt.Errorf("create init log: %w", err)
	}
	defer logf.Close()
	files := []*os.File{lnFile, logf}
	deadline := time.Now().Add(startTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = l.setup.SetDeadline(deadline)
	if err := send(l.setup, cfg, files...); err != nil {
		return "", nil, fmt.Errorf("send config to init: %w%s", err, l.earlyOutput())
	}
	// The first command's control connection is made now, while the init
	// boots (the listener is ours until then: the connection waits in its
	// backlog), off the path from ready to that command's start.
	first, _ := dialControl(sockPath)
	defer func() {
		if err != nil && first != nil {
			_ = first.Close()
		}
	}()
	var ready initReady
	if _, err := recv(l.setup, &ready, maxReply); err != nil {
		return "", nil, fmt.Errorf("wait for init to be ready: %w%s%s", err, l.earlyOutput(), initLogTail(dir))
	}
	if ready.Error != "" {
		return "", nil, fmt.Errorf("init: %s", ready.Error)
	}
	return ready.Landlock, first, nil
}

// earlyOutput is what the init wrote before it had its log, for error
// messages; it waits briefly for the init to be gone or to have moved on.
func (l *launched) earlyOutput() string {
	select {
	case b := <-l.early:
		l.early <- b
		if len(b) > 0 {
			return " (init output: " + strings.TrimSpace(string(b)) + ")"
		}
	case <-time.After(100 * time.Millisecond):
	}
	return ""
}

// initLogTail is the end of a session's init log, for error messages.
func initLogTail(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, "init.log"))
	if err != nil || len(b) == 0 {
		return ""
	}
	if len(b) > 400 {
		b = b[len(b)-400:]
	}
	return " (init log: " + strings.TrimSpace(string(b)) + ")"
}

// initChild is an init this process started: its exit is waited for
// without polling and without a thread blocked in wait (which keeps the
// runtime's sysmon waking every 20 µs, on the CPU the init starts on),
// and it is signalled with no pid reuse race.
type initChild struct {
	pid int
	// pidfd, when the kernel gave one, is what the init is waited for
	// (in the network poller) and signalled through.
	pidfd *os.File
	// Without a pidfd, a thread waits without reaping (WNOWAIT), so the
	// pid stays the init's zombie, safe to signal, until done is set.
	mu   sync.Mutex
	done bool
	// reaped is closed once the init has been waited for: its pid
	// namespace is gone and it has left its cgroups, which can then be
	// removed at once (a zombie still holds them: rmdir says EBUSY).
	reaped chan struct{}
}

// newInitChild starts reaping the init pid as soon as it exits.
func newInitChild(pid, pidfd int) *initChild {
	ch := &initChild{pid: pid, reaped: make(chan struct{})}
	if pidfd >= 0 {
		if f, err := pidfdFile(pidfd); err == nil {
			ch.pidfd = f
			go ch.reapPidfd()
			return ch
		}
	}
	go func() {
		ch.reapPid()
		close(ch.reaped)
	}()
	return ch
}

// reapPidfd reaps the init once its pidfd turns readable: it has exited.
// A kernel that cannot poll a pidfd (5.2) or wait on one (before 5.4)
// gets the wait by pid, the pidfd kept for signalling.
func (ch *initChild) reapPidfd() {
	defer close(ch.reaped)
	defer ch.pidfd.Close()
	reaped := false
	if rc, err := ch.pidfd.SyscallConn(); err == nil {
		_ = rc.Read(func(fd uintptr) bool {
			for {
				var info unix.Siginfo
				err := unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOHANG, nil)
				switch {
				case err == unix.EINTR:
					continue
				case err == nil && info.Signo == 0:
					return false // not exited yet: wait for the pidfd
				case err == nil || err == unix.ECHILD:
					reaped = true // reaped now, or by someone else
				}
				return true // reaped, or no waitid on a pidfd here
			}
		})
	}
	if !reaped {
		ch.reapPid()
	}
}

// reapPid is the wait without a pidfd; its caller closes reaped.
func (ch *initChild) reapPid() {
	var info unix.Siginfo
	for unix.Waitid(unix.P_PID, ch.pid, &info, unix.WEXITED|unix.WNOWAIT, nil) == unix.EINTR {
	}
	ch.mu.Lock()
	ch.done = true
	ch.mu.Unlock()
	var ws unix.WaitStatus
	for {
		if _, err := unix.Wait4(ch.pid, &ws, 0, nil); err != unix.EINTR {
			break
		}
	}
}

// kill ends the init and with it its pid namespace, and waits (up to two
// seconds) for it to be reaped.
func (ch *initChild) kill() {
	ch.signal()
	ch.wait()
}

// signal sends the init SIGKILL, unless it has exited already.
func (ch *initChild) signal() {
	if ch.pidfd != nil {
		if rc, err := ch.pidfd.SyscallConn(); err == nil {
			// Control fails once the reaper has closed the pidfd.
			_ = rc.Control(func(fd uintptr) { _ = unix.PidfdSendSignal(int(fd), unix.SIGKILL, nil, 0) })
		}
		return
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if !ch.done {
		_ = unix.Kill(ch.pid, unix.SIGKILL)
	}
}

// wait waits (up to two seconds) for the init to be reaped.
func (ch *initChild) wait() {
	t := time.NewTimer(2 * time.Second)
	defer t.Stop()
	select {
	case <-ch.reaped:
	case <-t.C:
	}
}

// killInit ends session id's init and with it its pid namespace, and
// waits (up to two seconds) for it to be gone.
func killInit(pid int, id string) {
	if !initAlive(pid, id) {
		return
	}
	if fd, err := unix.PidfdOpen(pid, 0); err == nil {
		defer unix.Close(fd)
		if initAlive(pid, id) { // still ours after the open: no pid reuse race
			_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			_, _ = unix.Poll(fds, 2000)
		}
		return
	}
	_ = unix.Kill(pid, unix.SIGKILL)
	for i := 0; i < 400 && initAlive(pid, id); i++ {
		time.Sleep(5 * time.Millisecond)
	}
}

// initAlive reports whether pid is a live (not zombie) agentbox init,
// session id's when id is not "" (and so not a recycled pid, nor another
// session's init that took it over): the init's arguments name its
// session.
func initAlive(pid int, id string) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || !strings.HasPrefix(string(b), initMarker+"\x00") {
		return false
	}
	if id != "" && !slices.Contains(strings.Split(string(b), "\x00"), "id="+id) {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	if i := strings.LastIndexByte(string(stat), ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
		return false
	}
	return true
}

// containsPath reports whether p is dir or lies below it, after symlinks
// in either are resolved (as far as they exist).
func containsPath(dir, p string) bool {
	resolve := func(x string) string {
		x = filepath.Clean(x)
		if r, err := filepath.EvalSymlinks(x); err == nil {
			return r
		}
		return x
	}
	dir, p = resolve(dir), resolve(p)
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}
