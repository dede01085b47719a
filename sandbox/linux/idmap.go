package linux

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/beneath"
	"github.com/agentbox/agentbox/sandbox/linux/control"
)

// The workspace and the mounts of a session are idmapped mounts: a file
// their owner has on the host is the session user's inside, and a file
// the session user makes is their owner's on the host. Nothing on the
// host ever changes owner, whoever owns the directory, and the sandbox
// runs as ids no host account has.
//
// An idmapped mount maps the ids on disk through a user namespace: an
// inode owned by id d appears owned by what that namespace maps d to.
// For a tree owned by o:g it is a namespace mapping o to the session
// user's host id (the session's first host id plus its uid inside) and g
// to its group's; every other owner shows as the overflow id (nobody). A
// user namespace needs a process to make it: holdUserns starts one (the
// init program, which only waits) and keeps its namespace's descriptor.

// sources opens what the init mounts from the host (the workspace, then
// each mount's source) as detached idmapped mounts to send with its
// config (control.Config.Idmapped), for the session whose first host id
// is base; none for a rootless session. Each owner's user namespace is
// made once.
func (c *Client) sources(cfg *control.Config, base uint32) ([]*os.File, error) {
	if !cfg.Idmapped {
		return nil, nil
	}
	paths := []string{cfg.Workspace}
	ro := []bool{false}
	for _, m := range cfg.Mounts {
		paths = append(paths, m.Source)
		ro = append(ro, m.ReadOnly)
	}
	var out []*os.File
	fail := func(err error) ([]*os.File, error) {
		control.CloseAll(out)
		return nil, err
	}
	userns := map[[2]uint32]*os.File{}
	defer func() {
		for _, f := range userns {
			f.Close()
		}
	}()
	for i, p := range paths {
		fd, err := openSource(p)
		if err != nil {
			return fail(err)
		}
		var st unix.Stat_t
		err = unix.Fstat(fd, &st)
		if err != nil {
			unix.Close(fd)
			return fail(fmt.Errorf("stat %s: %w", p, err))
		}
		owner := [2]uint32{st.Uid, st.Gid}
		ns := userns[owner]
		if ns == nil {
			ns, err = c.holdUserns(st.Uid, base+uint32(cfg.UID), st.Gid, base+uint32(cfg.GID))
			if err != nil {
				unix.Close(fd)
				return fail(err)
			}
			userns[owner] = ns
		}
		tree, err := idmappedTree(fd, p, ns, ro[i])
		unix.Close(fd)
		if err != nil {
			return fail(err)
		}
		out = append(out, tree)
	}
	return out, nil
}

// idmappedTree is a detached copy of the mount at the directory or file
// fd (opened as p), idmapped through the user namespace ns, nosuid and
// nodev, and read-only when readOnly.
func idmappedTree(fd int, p string, ns *os.File, readOnly bool) (*os.File, error) {
	tree, err := unix.OpenTree(fd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH)
	if err != nil {
		return nil, fmt.Errorf("clone the mount of %s: %w", p, err)
	}
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV, Userns_fd: uint64(ns.Fd())}
	if readOnly {
		attr.Attr_set |= unix.MOUNT_ATTR_RDONLY
	}
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, attr); err != nil {
		unix.Close(tree)
		return nil, idmapError(p, err)
	}
	return os.NewFile(uintptr(tree), p), nil
}

// idmapError says why p cannot be idmapped, and what to do instead.
func idmapError(p string, err error) error {
	var fs unix.Statfs_t
	kind := "its file system"
	if unix.Statfs(p, &fs) == nil {
		kind = fmt.Sprintf("its file system (type %#x)", fs.Type)
	}
	switch err {
	case unix.EINVAL, unix.EPERM, unix.EOPNOTSUPP, unix.ENOSYS:
		return fmt.Errorf("%s cannot be mounted into the sandbox with its ids mapped (%v): %s or this kernel does not support idmapped mounts (Linux 5.12+; tmpfs 6.3+); use a directory on ext4, xfs, btrfs or tmpfs, or let the session create its workspace (no --workspace)", p, err, kind)
	}
	return fmt.Errorf("idmap %s: %w", p, err)
}

// holdUserns makes a user namespace that maps the host id uid to toUID
// and gid to toGID, and returns its descriptor: the namespace lives while
// the descriptor is open. A user namespace needs a process to make it;
// this one never runs a line of its own: it is started traced, so the
// kernel stops it at its execve, before the program's first instruction,
// and it is killed once its namespace is open. Starting a program that
// ran until told to exit cost a Go runtime's start and exit per session
// (A/B in bench/README.md).
func (c *Client) holdUserns(uid, toUID, gid, toGID uint32) (*os.File, error) {
	none := ^uintptr(0) // closed in the child
	attr := &syscall.ProcAttr{
		Dir:   "/",
		Env:   []string{},
		Files: []uintptr{none, none, none, c.initFile.Fd()},
		Sys: &syscall.SysProcAttr{
			Ptrace:      true,
			Cloneflags:  unix.CLONE_NEWUSER,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: int(uid), HostID: int(toUID), Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: int(gid), HostID: int(toGID), Size: 1}},
		},
	}
	// The tracer is the thread that forked; it also reaps the child.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pid, err := syscall.ForkExec(initPath(3), []string{"agentbox-linux-userns"}, attr)
	if err != nil {
		return nil, fmt.Errorf("start a user namespace for an idmapped mount: %w (a kernel.yama.ptrace_scope of 3 forbids the traced start it needs)", err)
	}
	ns, err := os.Open("/proc/" + strconv.Itoa(pid) + "/ns/user")
	_ = unix.Kill(pid, unix.SIGKILL)
	for {
		var ws unix.WaitStatus
		if _, werr := unix.Wait4(pid, &ws, 0, nil); werr != unix.EINTR {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("open the user namespace for an idmapped mount: %w", err)
	}
	return ns, nil
}

// openSource opens the host path p of a workspace or mount source without
// following a symlink in any of its components. Threat: a sandbox that
// shares a directory plants a link in it (out -> /root), and a later
// session given that path as a source (--ro shared/out) would mount what
// the link names. A link is refused, named, and the way out said.
func openSource(p string) (int, error) {
	fd, err := beneath.OpenPath(p, beneath.Options{Flags: unix.O_PATH})
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return -1, fmt.Errorf("%w: a workspace or mount source is never reached through a symbolic link (one in a shared directory may have been planted by a sandbox); name the directory it leads to, if you trust it", err)
		}
		return -1, fmt.Errorf("open %s: %w", p, err)
	}
	return fd, nil
}
