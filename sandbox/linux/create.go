package linux

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox/agentbox/sandbox/linux/control"
	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/owned"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/linux/cgroups"
)

// Defaults for limits that always exist.
const (
	// defaultCPUWeight is every session's share of the CPU under
	// contention: half a default group's (cgroup2's scale), so that busy
	// sandboxes leave the host's own work its due even without --cpus.
	defaultCPUWeight = 50
	// defaultWorkspaceBytes and defaultWorkspaceInodes bound a workspace
	// the session makes when no --disk asks for another size.
	defaultWorkspaceBytes  = 2 << 30
	defaultWorkspaceInodes = 256 << 10
	defaultTmpBytes        = 256 << 20
	defaultFileSize        = 8 << 30
	defaultNoFile          = 4096
	startTimeout           = 10 * time.Second
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
	s, err := c.create(ctx, spec, c.newID(), nil)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// adoption is what a session rebuilt on the workspace of a gone session
// that owned it takes over: the workspace (it removes it at its end), and
// the tmpfs it is when it is one.
type adoption struct{ tmpfs bool }

// create builds a session; adopt, when set, makes it own (and later
// remove) the existing spec.Workspace, for a session rebuilt on its own.
func (c *Client) create(ctx context.Context, spec sandbox.Spec, id string, adopt *adoption) (_ *session, err error) {
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
	// Registered with the reaper before anything of it exists, so that
	// nothing outlives this process should it die from here on.
	var owner *owner
	if !spec.Detached {
		if owner, err = self(); err != nil {
			return nil, sandbox.Wrap(op, nil, err)
		}
		if err := c.own(id); err != nil {
			return nil, err
		}
		u.push(func() { c.disown(id) })
	}
	dir := c.sessionDir(id)
	if err := os.MkdirAll(c.opts.StateDir, 0o700); err != nil {
		return nil, sandbox.Wrap(op, nil, fmt.Errorf("create state directory %s: %w", c.opts.StateDir, err))
	}
	// The session directory comes first: an id slot whose directory does
	// not exist is free for the taking (ids.go).
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, sandbox.Wrap(op, nil, fmt.Errorf("create session directory %s: %w", dir, err))
	}
	u.push(func() { _ = os.RemoveAll(dir) })
	st := sandbox.State{
		Version: sandbox.StateVersion, Backend: c.Name(), ID: id, Spec: spec,
		CreatedAt: time.Now().UTC(),
	}
	h := handles{StateDir: dir, Socket: filepath.Join(dir, "control.sock"), Owner: owner}
	ws := spec.Workspace
	if ws == "" {
		ws = c.defaultWorkspace(id)
	}
	cfg := &control.Config{Rootless: c.rootless,
		ID: id, Root: control.RootMountPoint, Workspace: ws, Workdir: workdirOf(spec),
		Mounts: spec.Mounts, ReadOnly: spec.Policy.Filesystem.ReadOnly, Deny: spec.Policy.Filesystem.Deny,
		UID: uid, GID: gid, Network: spec.Policy.Network.EffectiveMode(),
		TmpBytes: defaultTmpBytes, FileSize: defaultFileSize, NoFile: defaultNoFile,
	}
	if d := spec.Policy.Resources.DiskBytes; d > 0 {
		cfg.FileSize = d
		cfg.TmpBytes = min(d, defaultTmpBytes)
	}
	cfg.SessionTimeout = int64(spec.Policy.Resources.SessionTimeout)
	cfg.IdleTimeout = int64(spec.Policy.Resources.IdleTimeout)

	// As root, the session's user namespace maps its ids to a slot of
	// host ids of its own (see ids.go).
	if !c.rootless {
		if h.IDBase, err = c.slots.claim(dir); err != nil {
			return nil, err
		}
		base := h.IDBase
		u.push(func() { c.slots.release(base, dir) })
		cfg.Idmapped = true
	} else {
		cfg.Root = dir // the rootless init is the user: it reaches its own directories
	}
	g, err := c.cg.Create(id, cgroups.Limits{
		MemoryBytes: spec.Policy.Resources.MemoryBytes,
		Pids:        spec.Policy.Resources.Pids,
		CPUs:        spec.Policy.Resources.CPUs,
		Weight:      c.cpuWeight(),
	})
	if err != nil {
		return nil, sandbox.Wrap(op, nil, err)
	}
	u.push(func() { _ = g.Remove() })
	if h.IDBase != 0 {
		if err := g.Delegate(int(h.IDBase), int(h.IDBase)); err != nil {
			return nil, sandbox.Wrap(op, nil, err)
		}
	}
	// The host side is set up while the init starts (its Go runtime's
	// start is the longest step of a session start): the init gets the
	// workspace and the mounts as descriptors with its config.
	l, err := c.launchInit(cfg, g, h.IDBase)
	if err != nil {
		return nil, sandbox.Wrap(op, nil, err)
	}
	defer l.close()
	child = l.child
	pid := child.proc.Pid
	if err := c.prepareHost(ctx, &st, &h, &u, spec, ws, adopt); err != nil {
		return nil, err
	}
	srcs, err := c.sources(cfg, h.IDBase)
	if err != nil {
		return nil, sandbox.Wrap(op, nil, err)
	}
	defer control.CloseAll(srcs)
	if made := recordMadeDirs(ws, cfg); len(made) > 0 {
		h.MadeDirs = made
		u.push(func() { _ = removeMadeDirs(made) }) // after the init is killed
	}
	if t := spec.Policy.Resources.SessionTimeout; t > 0 {
		h.Deadline = time.Now().Add(t)
	}
	h.InitPID = pid
	// state.json names the init from its first moment, so that Delete
	// finds it should this process die now. It lacks only the landlock
	// report, which Resume asks the init for.
	st.Handles = sandbox.EncodeHandles(h)
	if err := writeState(dir, st); err != nil {
		return nil, sandbox.Wrap(op, nil, err)
	}
	report, err := l.configure(ctx, h.Socket, dir, cfg, srcs)
	if err != nil {
		return nil, sandbox.Wrap(op, nil, err)
	}
	h.Landlock = report

	s := newSession(c, st, h, g)
	s.child = child
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

// prepareHost makes the workspace (fresh, on a size-limited image, or
// seeded from a snapshot), with its undo.
func (c *Client) prepareHost(ctx context.Context, st *sandbox.State, h *handles, u *undo, spec sandbox.Spec, ws string, adopt *adoption) error {
	const op = "linux: create"
	dir := h.StateDir
	if spec.Workspace == "" {
		if err := os.Mkdir(ws, 0o755); err != nil {
			return sandbox.Wrap(op, nil, fmt.Errorf("create workspace: %w", err))
		}
		u.push(func() { _ = os.RemoveAll(ws) })
		st.OwnsWorkspace = true
		if spec.Policy.Resources.DiskBytes > 0 {
			img := filepath.Join(dir, "disk.img")
			if err := mountDisk(ctx, img, ws, spec.Policy.Resources.DiskBytes, os.Getuid(), os.Getgid()); err != nil {
				return sandbox.Wrap(op, nil, err)
			}
			h.DiskImage = img
			u.push(func() { unmountDisk(ws) })
		} else if !c.rootless {
			// Bounded by default: a tmpfs of its own (in memory, which the
			// session's memory limit counts as its commands write it), so a
			// command cannot fill the host's disk or its inodes.
			opts := fmt.Sprintf("size=%d,nr_inodes=%d,mode=0755", defaultWorkspaceBytes, defaultWorkspaceInodes)
			if err := unix.Mount("agentbox-workspace", ws, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
				return sandbox.Wrap(op, nil, fmt.Errorf("bound the workspace %s with a tmpfs: %w", ws, err))
			}
			h.WorkspaceTmpfs = true
			u.push(func() { _ = unix.Unmount(ws, unix.MNT_DETACH) })
		}
	}
	if spec.Snapshot != "" {
		if err := c.restore(ctx, spec.Snapshot, ws, spec.Workspace != "", workspaceBound(spec, h.WorkspaceTmpfs)); err != nil {
			return err
		}
		st.Snapshot = spec.Snapshot
	}
	st.Workspace = ws
	if adopt != nil {
		st.OwnsWorkspace = true
		st.Spec.Workspace = ""
		h.WorkspaceTmpfs = adopt.tmpfs
	}
	return nil
}

// checkSpec refuses what this backend cannot do with a spec, before
// anything is started.
func (c *Client) checkSpec(spec *sandbox.Spec) error {
	const op = "linux: create"
	if err := sandbox.CheckPorts(spec.Ports); err != nil {
		return sandbox.Wrap(op, sandbox.ErrInvalid, err)
	}
	if spec.Image != "" {
		return sandbox.Errorf(sandbox.ErrInvalid, "linux: image %q: the linux backend runs the host's own tools and takes no image (--image is for the docker backend)", spec.Image)
	}
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
		if err := checkSource(spec.Workspace); err != nil {
			return sandbox.Wrap(op, sandbox.ErrInvalid, fmt.Errorf("workspace %s: %w", spec.Workspace, err))
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
	for _, top := range append(slices.Clone(control.ToolDirs), "/etc", "/dev", "/proc", "/tmp") {
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
		if err := checkSource(m.Source); err != nil {
			return sandbox.Wrap(op, sandbox.ErrInvalid, fmt.Errorf("mount source %s: %w", m.Source, err))
		}
	}
	return nil
}

// restore seeds dir from a snapshot of at most maxBytes (0: any). A
// store restores as this process, so into a directory someone owns
// (theirs) the tree is given to that owner before it is moved into place
// (owned.Restore): otherwise, as root, the restored files would be root's
// on the host, and through the idmapped workspace no one's inside the
// sandbox. A workspace the backend made is this process's own (a mount
// point, restored into in place).
func (c *Client) restore(ctx context.Context, ref, dir string, theirs bool, maxBytes int64) error {
	if c.opts.Snapshots == nil {
		return sandbox.Errorf(sandbox.ErrInvalid, "linux: spec names snapshot %s but the client has no snapshot store", ref)
	}
	if theirs {
		p, err := owned.Restore(ctx, c.opts.Snapshots, ref, dir, nil, maxBytes)
		if err != nil {
			return sandbox.Wrap("linux: restore snapshot "+ref, nil, err)
		}
		return p.Close()
	}
	if err := c.opts.Snapshots.Restore(ctx, ref, dir, maxBytes); err != nil {
		return sandbox.Wrap("linux: restore snapshot "+ref, nil, err)
	}
	return nil
}

// workspaceBound is what a session's workspace may hold, which bounds
// the snapshots it is saved as or seeded from: its disk limit, or the
// size of the tmpfs it was given by default; 0 for a directory of the
// user's, which has no quota.
func workspaceBound(spec sandbox.Spec, tmpfs bool) int64 {
	switch {
	case spec.Policy.Resources.DiskBytes > 0:
		return spec.Policy.Resources.DiskBytes
	case tmpfs:
		return defaultWorkspaceBytes
	}
	return 0
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

// checkSource refuses, before anything starts, a source path that a link
// leads through (see openSource, which holds when the path is opened).
func checkSource(p string) error {
	fd, err := openSource(p)
	if err != nil {
		return err
	}
	return unix.Close(fd)
}

// cpuWeight is the CPU share sessions get where a cpu controller is there
// to give it; 0 (none asked) where not.
func (c *Client) cpuWeight() int {
	if c.cg.Where(cgroups.CPU) == "" {
		return 0
	}
	return defaultCPUWeight
}
