// Package linux is agentbox's native backend. A session is a long-lived
// init in fresh mount, pid, network, ipc, uts and cgroup namespaces (and a
// user namespace when the caller is not root),
// started by re-executing the agentbox binary (see Main). Its root is a
// tmpfs with read-only binds of the host's tool directories, the
// workspace read-write at /workspace, a fresh /proc, a minimal /dev and a
// /tmp tmpfs; commands are forked by the init from a thread that has no
// capabilities, no_new_privs, a landlock domain and the seccomp filter,
// inside a cgroup that bounds memory, pids and CPU.
package linux

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/agentbox/agentbox/sandbox/egress"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/agentbox/agentbox/internal/sibling"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/linux/cgroups"
	"github.com/agentbox/agentbox/sandbox/seccomp"
	"golang.org/x/sys/unix"
)

// Options configure a Client.
type Options struct {
	// StateDir holds one directory per session (control socket, init log,
	// disk image), host-only, mode 0700. Default DefaultStateDir.
	StateDir string
	// Snapshots stores workspace snapshots; Session.Snapshot needs it.
	Snapshots sandbox.SnapshotStore
	// Logger receives warnings (weakened policies) and diagnostics.
	Logger *slog.Logger
	// InitBinary is the program started as each session's init: one that
	// links package nsinit. Default: the agentbox-init program beside this
	// executable when there is one that package sibling's rule lets run
	// (see cmd/agentbox-init; it starts faster than a large program), else
	// this executable.
	InitBinary string
	// IDs is the block of host ids sessions take theirs from, as root
	// (see ids.go). Zero means the "agentbox" entries of /etc/subuid and
	// /etc/subgid, else a default block no host account uses.
	IDs IDRange
	// EgressUpstream replaces how session proxies reach and verify
	// upstreams; for tests that play a remote HTTPS host on loopback.
	EgressUpstream egress.Upstream
}

// initPath is the path a child execs the init program by when it is
// given Client.initFile as its descriptor fd. It must be one of the
// descriptors the child is given, not the number the client holds it at:
// before it puts them in place, the child (Go's fork and exec) moves
// descriptors to the numbers just above the highest one it is given, and
// one of those numbers may be where the client holds the program (the
// higher the more descriptors the client has open: concurrent creates).
// The exec then found a pipe there and failed with EACCES.
func initPath(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// DefaultStateDir is where session state lives when Options.StateDir is
// empty.
const DefaultStateDir = "/run/agentbox/linux"

// Client is the linux backend.
type Client struct {
	opts     Options
	log      *slog.Logger
	cg       *cgroups.Host
	enforces []Part
	notes    []string
	// initFile is the program started as each session's init, held
	// open (O_PATH, close-on-exec): the checked agentbox-init beside this
	// program, or Options.InitBinary, or this program. A child is given
	// it among its descriptors and execs it from there (see initPath).
	initFile *os.File
	// rootless: not root, so each session gets a user namespace (see
	// startInit) and what needs host privileges is not claimed.
	rootless bool
	// newID makes session ids (replaced by tests to recognise theirs).
	newID func() string
	// beforeInitStart, when set (by tests), runs just before the init's
	// process is started.
	beforeInitStart func()
	// slots hands out each session's host ids (as root).
	slots idSlots
}

// Part is a policy part (an alias kept short for this package's tables).
type Part = sandbox.Part

// New detects what this host can enforce and returns a client. It fails
// with ErrUnavailable when the backend cannot run here at all.
func New(opts Options) (_ *Client, err error) {
	rootless := os.Geteuid() != 0
	// The directory the state lives in must be the user's alone: for a
	// default one (made here), its parent; one the caller names is
	// checked itself (its parent may well be a shared tmpfs).
	private, open := "", os.FileMode(0o077)
	if opts.StateDir == "" {
		opts.StateDir = DefaultStateDir
		if rootless {
			opts.StateDir = rootlessStateDir()
			private = filepath.Dir(opts.StateDir)
		}
	} else {
		// Clean: session directories are named by joining to it, and
		// release removes only what lies below it.
		opts.StateDir = filepath.Clean(opts.StateDir)
		if rootless {
			private, open = opts.StateDir, 0o022 // others may list it, not change it
		}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	c := &Client{opts: opts, log: opts.Logger, newID: newID, rootless: rootless}
	if !rootless {
		block, from, err := findIDs(opts.IDs, "/etc")
		if err != nil {
			return nil, sandbox.Wrap("linux: new", sandbox.ErrUnavailable, fmt.Errorf("no host ids for sandboxes: %w", err))
		}
		c.slots = idSlots{block: block, dir: slotDir}
		c.notes = append(c.notes, fmt.Sprintf("identity: each session has a user namespace whose ids map to %d host ids of its own, from %s (%s); the workspace and mounts are idmapped to their owners", sessionIDs, block, from))
	}
	if rootless {
		if err := userNamespacesAllowed(); err != nil {
			return nil, sandbox.Wrap("linux: new", sandbox.ErrUnavailable,
				fmt.Errorf("not root, and %w; run as root, or use --backend docker or local", err))
		}
		c.notes = append(c.notes, "rootless: the session has a user namespace of its own, where the sandbox user 1000 is you")
		if err := privateDir(private, open); err != nil {
			return nil, sandbox.Wrap("linux: new", sandbox.ErrUnavailable, err)
		}
	}
	// /proc/self/ns lists the namespace types the kernel has (one
	// directory read, not a stat per type).
	have, err := os.ReadDir("/proc/self/ns")
	if err != nil {
		return nil, sandbox.Wrap("linux: new", sandbox.ErrUnavailable, fmt.Errorf("list the kernel's namespaces: %w", err))
	}
	for _, ns := range []string{"mnt", "pid", "net", "ipc", "uts", "cgroup"} {
		if !slices.ContainsFunc(have, func(e os.DirEntry) bool { return e.Name() == ns }) {
			return nil, sandbox.Wrap("linux: new", sandbox.ErrUnavailable, fmt.Errorf("kernel lacks %s namespaces (no /proc/self/ns/%s)", ns, ns))
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, sandbox.Wrap("linux: new", sandbox.ErrUnavailable, fmt.Errorf("find the agentbox binary to re-execute: %w", err))
	}
	// The init program is held open and started from a descriptor
	// (/proc/self/fd/N): it is the file that was checked, and the init,
	// whose ids are no host account's, need not be able to walk the path
	// to it (a program in a private directory is still its own init).
	init := exe
	fd := -1
	if opts.InitBinary != "" {
		init = opts.InitBinary
	} else if p, err := sibling.Open("agentbox-init"); err == nil {
		init = p.Name
		fd, err = unix.FcntlInt(p.Fd(), unix.F_DUPFD_CLOEXEC, 0)
		p.Close()
		if err != nil {
			return nil, sandbox.Wrap("linux: new", sandbox.ErrUnavailable, fmt.Errorf("hold %s: %w", init, err))
		}
	} else if !sibling.IsMissing(err) {
		c.notes = append(c.notes, "agentbox-init beside this program is not used: "+err.Error())
	}
	if fd < 0 {
		if fd, err = unix.Open(init, unix.O_PATH|unix.O_CLOEXEC, 0); err != nil {
			return nil, sandbox.Wrap("linux: new", sandbox.ErrUnavailable, fmt.Errorf("open the init program %s: %w", init, err))
		}
	}
	c.initFile = os.NewFile(uintptr(fd), init)
	cg, err := cgroups.Detect()
	if err != nil {
		c.notes = append(c.notes, err.Error())
		cg = &cgroups.Host{V1: map[string]string{}}
	}
	if rootless {
		usable, dropped := cg.Usable()
		if len(dropped) > 0 {
			c.notes = append(c.notes, "rootless: cannot create groups in "+strings.Join(dropped, ", ")+
				": memory, pids and cpu limits and timeouts of whole process trees need root or a delegated cgroup")
		}
		cg = usable
	}
	c.cg = cg
	c.enforces = []Part{sandbox.PartFilesystem, sandbox.PartReadOnlyPaths, sandbox.PartDenyPaths,
		sandbox.PartNetworkNone, sandbox.PartNetworkAllowList, sandbox.PartNetworkInspect, sandbox.PartProcesses, sandbox.PartOutput}
	if _, err := seccomp.Filter(); err == nil {
		c.enforces = append(c.enforces, sandbox.PartIdentity)
	} else {
		c.notes = append(c.notes, "identity not enforced: "+err.Error())
	}
	for _, m := range []struct {
		part Part
		ctl  string
	}{{sandbox.PartMemory, cgroups.Memory}, {sandbox.PartPids, cgroups.Pids}, {sandbox.PartCPU, cgroups.CPU}} {
		if w := cg.Where(m.ctl); w != "" {
			c.enforces = append(c.enforces, m.part)
			c.notes = append(c.notes, fmt.Sprintf("%s: cgroup %s", m.part, w))
		}
	}
	if cost := cg.ThreadMoveCost(); cost != "" {
		c.notes = append(c.notes, cost)
	}
	// The init's own clock: no kernel feature needed.
	c.enforces = append(c.enforces, sandbox.PartIdleTimeout)
	switch cg.Tracking() {
	case "v1":
		c.enforces = append(c.enforces, sandbox.PartTimeout)
		c.notes = append(c.notes, "timeouts: each command in its own v1 pids group, born in it")
	case "v2":
		c.enforces = append(c.enforces, sandbox.PartTimeout)
		c.notes = append(c.notes, "timeouts: each command in its own cgroup2 group, moved at start")
	}
	if !rootless && diskAvailable() {
		c.enforces = append(c.enforces, sandbox.PartDisk)
	}
	if fs := diskBacked(opts.StateDir); fs != "" {
		c.notes = append(c.notes, fmt.Sprintf("session state in %s is on %s, not a tmpfs: every session start and end writes to it "+
			"(a directory made and removed each time); a tmpfs there (Options.StateDir, AGENTBOX_STATE_DIR in the CLI) makes it cheap", opts.StateDir, fs))
	}
	return c, nil
}

// diskBacked names the file system dir (or the nearest parent that
// exists) is on when that is not a tmpfs; "" for a tmpfs or when it
// cannot tell.
func diskBacked(dir string) string {
	for d := dir; ; d = filepath.Dir(d) {
		var st unix.Statfs_t
		if err := unix.Statfs(d, &st); err == nil {
			switch st.Type {
			case unix.TMPFS_MAGIC, unix.RAMFS_MAGIC:
				return ""
			case unix.EXT4_SUPER_MAGIC:
				return "ext4"
			case unix.XFS_SUPER_MAGIC:
				return "xfs"
			case unix.BTRFS_SUPER_MAGIC:
				return "btrfs"
			case unix.OVERLAYFS_SUPER_MAGIC:
				return "overlayfs"
			}
			return fmt.Sprintf("a file system of type %#x", st.Type)
		}
		if d == "/" || d == "." {
			return ""
		}
	}
}

// Name is "linux".
func (c *Client) Name() string { return "linux" }

// Enforces lists what this host lets the backend enforce, in the order of
// sandbox.AllParts.
func (c *Client) Enforces() []Part {
	out := make([]Part, 0, len(c.enforces))
	for _, p := range sandbox.AllParts {
		if slices.Contains(c.enforces, p) {
			out = append(out, p)
		}
	}
	return out
}

// Notes say how each part is enforced on this host (cgroup version, etc.).
func (c *Client) Notes() []string { return slices.Clone(c.notes) }

// newID is a random session id: 12 hex digits.
func newID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// sessionDir is a session's host-only state directory.
func (c *Client) sessionDir(id string) string { return filepath.Join(c.opts.StateDir, id) }

// defaultWorkspace is where a session that is given no workspace has the
// one it makes.
func (c *Client) defaultWorkspace(id string) string {
	return filepath.Join(c.opts.StateDir, id+".workspace")
}

// diskAvailable reports whether workspace quotas can be made: an ext4
// image on a loop device needs mkfs.ext4 and /dev/loop-control.
func diskAvailable() bool {
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		return false
	}
	_, err := os.Stat("/dev/loop-control")
	return err == nil
}

// rootlessStateDir is the state directory of an unprivileged user's
// sessions: under $XDG_RUNTIME_DIR when set (a per-user tmpfs), else in
// the temporary directory, named after the uid.
func rootlessStateDir() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "agentbox", "linux")
	}
	return filepath.Join(os.TempDir(), "agentbox-"+strconv.Itoa(os.Geteuid()), "linux")
}

// userNamespacesAllowed reports why an unprivileged user cannot create a
// user namespace here, when a kernel switch says so.
func userNamespacesAllowed() error {
	if _, err := os.Stat("/proc/self/ns/user"); err != nil {
		return fmt.Errorf("the kernel has no user namespaces: %w", err)
	}
	for _, sw := range []struct{ file, why string }{
		{"/proc/sys/user/max_user_namespaces", "user namespaces are disabled (user.max_user_namespaces = 0)"},
		{"/proc/sys/kernel/unprivileged_userns_clone", "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone = 0)"},
	} {
		b, err := os.ReadFile(sw.file)
		if err == nil && strings.TrimSpace(string(b)) == "0" {
			return errors.New(sw.why)
		}
	}
	return nil
}

// CheckStateDir makes sure dir can hold a user's session state and
// returns it cleaned: absolute, made (mode 0700) if missing, owned by
// the caller and writable by no one else (privateDir), below directories
// only root or the caller can change, or sticky ones like /tmp. Threat:
// another user renaming or planting session directories, sockets or
// workspaces, there or on the way there. New checks no more than the
// directory itself: callers that take a directory from outside (the
// CLI's AGENTBOX_STATE_DIR) check it here first.
func CheckStateDir(dir string) (string, error) {
	if !filepath.IsAbs(dir) {
		return "", fmt.Errorf("state directory %s: must be an absolute path", dir)
	}
	dir = filepath.Clean(dir)
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return "", fmt.Errorf("create state directory %s: %w", dir, err)
	}
	if err := privateDir(dir, 0o022); err != nil {
		return "", err
	}
	me := os.Geteuid()
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		fi, err := os.Lstat(d)
		if err != nil {
			return "", fmt.Errorf("state directory %s: %w", dir, err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		switch {
		case !fi.IsDir():
			return "", fmt.Errorf("state directory %s: %s is not a directory (a symlink?)", dir, d)
		case !ok || (int(st.Uid) != me && st.Uid != 0):
			return "", fmt.Errorf("state directory %s: %s belongs to uid %d, neither you nor root", dir, d, st.Uid)
		case fi.Mode().Perm()&0o022 != 0 && fi.Mode()&os.ModeSticky == 0:
			return "", fmt.Errorf("state directory %s: %s is writable by others (%s) and not sticky", dir, d, fi.Mode().Perm())
		}
		if d == "/" {
			return dir, nil
		}
	}
}

// privateDir makes dir (mode 0700) if it is missing and checks that it is
// this user's own: a real directory, owned by the effective uid, with
// none of the open permission bits (0o077: no one else can enter; 0o022:
// no one else can change it). Threat: in a shared /tmp another user can
// make the directory first (or a symlink by its name) and so reach the
// control sockets inside.
func privateDir(dir string, open os.FileMode) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create state directory %s: %w", dir, err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("state directory %s: %w", dir, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("state directory %s is not a directory (a symlink?): refusing it", dir)
	case !ok || int(st.Uid) != os.Geteuid():
		return fmt.Errorf("state directory %s belongs to uid %d, not to you: refusing it", dir, st.Uid)
	case fi.Mode().Perm()&open != 0:
		return fmt.Errorf("state directory %s is open to others (%s): refusing it", dir, fi.Mode().Perm())
	}
	return nil
}
