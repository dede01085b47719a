// Package linux is agentbox's native backend. A session is a long-lived
// init in fresh mount, pid, network, ipc, uts and cgroup namespaces,
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
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/linux/cgroups"
	"github.com/agentbox/agentbox/sandbox/linux/seccomp"
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
	// InitBinary is the program started as each session's init: one whose
	// main calls Main first. Default: the agentbox-init program next to
	// this executable when there is a safe one (see cmd/agentbox-init;
	// it starts faster than a large binary), else this executable.
	InitBinary string
}

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
	exe      string
	// newID makes session ids (replaced by tests to recognise theirs).
	newID func() string
}

// Part is a policy part (an alias kept short for this package's tables).
type Part = sandbox.Part

// New detects what this host can enforce and returns a client. It fails
// with ErrUnavailable when the backend cannot run here at all.
func New(opts Options) (*Client, error) {
	if opts.StateDir == "" {
		opts.StateDir = DefaultStateDir
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	c := &Client{opts: opts, log: opts.Logger, newID: newID}
	if os.Geteuid() != 0 {
		return nil, sandbox.Wrap("linux: new", sandbox.ErrUnavailable,
			errors.New("the linux backend needs root (rootless mode through user namespaces is not implemented); use --backend local or docker"))
	}
	for _, ns := range []string{"mnt", "pid", "net", "ipc", "uts", "cgroup"} {
		if _, err := os.Stat("/proc/self/ns/" + ns); err != nil {
			return nil, sandbox.Wrap("linux: new", sandbox.ErrUnavailable, fmt.Errorf("kernel lacks %s namespaces: %w", ns, err))
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, sandbox.Wrap("linux: new", sandbox.ErrUnavailable, fmt.Errorf("find the agentbox binary to re-execute: %w", err))
	}
	c.exe = exe
	if opts.InitBinary != "" {
		c.exe = opts.InitBinary
	} else if p := filepath.Join(filepath.Dir(exe), "agentbox-init"); safeInitBinary(p) {
		c.exe = p
	}
	cg, err := cgroups.Detect()
	if err != nil {
		c.notes = append(c.notes, err.Error())
		cg = &cgroups.Host{V1: map[string]string{}}
	}
	c.cg = cg
	c.enforces = []Part{sandbox.PartFilesystem, sandbox.PartReadOnlyPaths, sandbox.PartDenyPaths,
		sandbox.PartNetworkNone, sandbox.PartProcesses, sandbox.PartOutput}
	if networkAllowListAvailable {
		c.enforces = append(c.enforces, sandbox.PartNetworkAllowList)
	}
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
	switch cg.Tracking() {
	case "v1":
		c.enforces = append(c.enforces, sandbox.PartTimeout)
		c.notes = append(c.notes, "timeouts: each command in its own v1 pids group, born in it")
	case "v2":
		c.enforces = append(c.enforces, sandbox.PartTimeout)
		c.notes = append(c.notes, "timeouts: each command in its own cgroup2 group, moved at start")
	}
	if diskAvailable() {
		c.enforces = append(c.enforces, sandbox.PartDisk)
	}
	return c, nil
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

// safeInitBinary reports whether p is a program root may run as an init:
// a regular, executable file owned by root and writable by no one else.
func safeInitBinary(p string) bool {
	fi, err := os.Stat(p)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 || fi.Mode()&0o022 != 0 {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Uid == 0
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
