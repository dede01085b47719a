package linux

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/linux/cgroups"
	"github.com/agentbox/agentbox/sandbox/linux/control"
	"github.com/agentbox/agentbox/sandbox/linux/nsinit"
	"golang.org/x/sys/unix"
)

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

// launchInit starts the init program (agentbox-init, or this program
// re-executed) as the session's init in new namespaces, born in the
// session's cgroup2 group. It holds the setup socket pair's end and the
// session's group directories (the spawning thread joins them at once);
// the number of the control socket configure sends is held by a
// placeholder, so that nothing else in the init takes it.
func (c *Client) launchInit(cfg *control.Config, g *cgroups.Group, base uint32) (_ *launched, err error) {
	args := control.Args{ID: cfg.ID, Join: len(g.ThreadDirs())}
	// Named in its environment, so that gc can tell from the process
	// alone whether its session's directory is gone (remains.go).
	if args.StateDir, err = filepath.Abs(c.opts.StateDir); err != nil {
		return nil, fmt.Errorf("state directory %s: %w", c.opts.StateDir, err)
	}
	if args.MountNS, err = mountNS("self"); err != nil {
		return nil, err
	}
	trackDir, thread := g.Tracking()
	if trackDir != "" {
		args.Tracking = "v2"
		if thread {
			args.Tracking = "v1"
		}
	}
	var opened []*os.File // closed when launchInit returns: the init has its copies
	defer func() { control.CloseAll(opened) }()
	open := func(name string) (*os.File, error) {
		f, err := os.Open(name)
		if err == nil {
			opened = append(opened, f)
		}
		return f, err
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("setup socket pair: %w", err)
	}
	parentEnd := os.NewFile(uintptr(pair[0]), "setup")
	childEnd := os.NewFile(uintptr(pair[1]), "setup-init")
	opened = append(opened, parentEnd, childEnd)
	placeholder, err := open(os.DevNull)
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	opened = append(opened, outW)
	defer func() {
		if err != nil {
			outR.Close()
		}
	}()
	// Descriptors from 3 on: control.FdSetup, FdControl (a placeholder
	// until configure), FdTracking (a placeholder when there is no
	// tracking group), then the group directories to join from
	// FdJoinFirst, then the init program (see initPath).
	track := placeholder
	if trackDir != "" {
		if track, err = open(trackDir); err != nil {
			return nil, fmt.Errorf("open tracking group %s: %w", trackDir, err)
		}
	}
	extra := []*os.File{childEnd, placeholder, track}
	for _, d := range g.ThreadDirs() {
		f, err := open(d)
		if err != nil {
			return nil, fmt.Errorf("open group %s: %w", d, err)
		}
		extra = append(extra, f)
	}
	extra = append(extra, c.initFile)
	exe := initPath(3 + len(extra) - 1)

	flags := uintptr(unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP)
	if cfg.Network != sandbox.NetworkHost {
		flags |= unix.CLONE_NEWNET
	}
	sys := &syscall.SysProcAttr{Cloneflags: flags, Setsid: true}
	if !cfg.Rootless {
		// The session's user namespace maps its ids 0..sessionIDs-1 to
		// its slot of host ids: the init is root in it (so it builds the
		// sandbox with capabilities over the session's namespaces only),
		// and root inside is no one outside.
		sys.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(base), Size: sessionIDs}}
		sys.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(base), Size: sessionIDs}}
		sys.GidMappingsEnableSetgroups = true
		// Host root is no id of the namespace: the child becomes its root
		// before it execs the init, which keeps its capabilities then.
		sys.Credential = &syscall.Credential{Uid: 0, Gid: 0, Groups: []uint32{}}
	} else {
		// A user namespace of the session's own in which the sandbox
		// user is the only id and maps to ours (an unprivileged map can
		// name no other). The init runs as that user, not as root, and
		// keeps the capabilities it needs to build the sandbox (over its
		// own namespaces only) as ambient ones across its execve; the
		// spawning thread drops them all, as it does as root.
		sys.UidMappings = []syscall.SysProcIDMap{{ContainerID: cfg.UID, HostID: os.Geteuid(), Size: 1}}
		sys.GidMappings = []syscall.SysProcIDMap{{ContainerID: cfg.GID, HostID: os.Getegid(), Size: 1}}
		last, err := nsinit.LastCap() // this kernel's, not the headers': an unknown one cannot be raised
		if err != nil {
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
		if gf, err := open(v2); err == nil {
			sys.UseCgroupFD = true
			sys.CgroupFD = int(gf.Fd())
		}
	}
	command := func() *exec.Cmd {
		return &exec.Cmd{
			Path: exe, Args: append([]string{control.Marker}, args.Argv()...),
			Dir: "/", Env: append([]string{"GOMAXPROCS=2", "GOGC=50"}, args.Env()...),
			Stdin: placeholder, Stdout: outW, Stderr: outW, ExtraFiles: extra,
			SysProcAttr: sys,
		}
	}
	cmd := command()
	start := func() {
		err = cmd.Start()
		if err != nil && sys.UseCgroupFD {
			// Kernels before 5.7 have no clone3 into a cgroup: move it after.
			sys.UseCgroupFD = false
			cmd = command()
			err = cmd.Start()
		}
	}
	if c.beforeInitStart != nil {
		c.beforeInitStart()
	}
	if cfg.Rootless {
		start()
	} else if oerr := asNamespaceOwner(base, start); oerr != nil {
		return nil, oerr
	}
	if err != nil {
		return nil, fmt.Errorf("start init %s: %w", c.initFile.Name(), err)
	}
	l := &launched{child: superviseInit(cmd), early: make(chan []byte, 1)}
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
		if err := g.AddV2(cmd.Process.Pid); err != nil {
			l.child.kill()
			l.close()
			return nil, err
		}
	}
	return l, nil
}

// configure gives the launched init its control socket (bound at sock),
// its log (in dir) and its sources (the workspace's and the mounts')
// with its config, and waits until it serves (or says why it cannot). It
// returns the init's landlock report.
func (l *launched) configure(ctx context.Context, sock, dir string, cfg *control.Config, sources []*os.File) (string, error) {
	ln, err := control.Listen(sock)
	if err != nil {
		return "", fmt.Errorf("listen on %s: %w", sock, err)
	}
	ln.SetUnlinkOnClose(false)
	lnFile, err := ln.File()
	ln.Close()
	if err != nil {
		return "", fmt.Errorf("control socket file: %w", err)
	}
	defer lnFile.Close()
	logf, err := os.OpenFile(filepath.Join(dir, "init.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return "", fmt.Errorf("create init log: %w", err)
	}
	defer logf.Close()
	deadline := time.Now().Add(startTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = l.setup.SetDeadline(deadline)
	if err := control.Send(l.setup, cfg, append([]*os.File{lnFile, logf}, sources...)...); err != nil {
		return "", fmt.Errorf("send config to init: %w%s", err, l.earlyOutput())
	}
	var ready control.Ready
	if _, err := control.Recv(l.setup, &ready, control.MaxReply); err != nil {
		return "", fmt.Errorf("wait for init to be ready: %w%s%s", err, l.earlyOutput(), initLogTail(dir))
	}
	if ready.Error != "" {
		return "", fmt.Errorf("init: %s", ready.Error)
	}
	return ready.Landlock, nil
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

// asNamespaceOwner runs start, which clones the init with a new user
// namespace, on a thread of its own whose effective ids are the session's
// root's host ids (base), its capabilities kept: the namespace is then
// owned by those ids. Threat: the kernel charges what a user namespace's
// users hold of a per-user limit (inotify instances, user namespaces, the
// other ucounts) to the namespace's owner as well, at each level up; a
// namespace owned by host root lets a session exhaust host root's share
// (200 inotify instances inside, and systemd, dockerd and tail -f on the
// host get EMFILE). Owned by the session's own ids, it spends only its
// own.
func asNamespaceOwner(base uint32, start func()) error {
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the runtime ends the thread, whose ids this
		// changes, with the goroutine.
		runtime.LockOSThread()
		// The real and saved ids stay 0, so the permitted capabilities
		// stay; the effective ones, which a change of the effective uid
		// clears, are raised again from them. All of this is per thread
		// (raw system calls: Go's own set*id act on every thread).
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, ^uintptr(0), uintptr(base), ^uintptr(0)); e != 0 {
			errc <- fmt.Errorf("take the session's group id %d to own its user namespace: %w", base, e)
			return
		}
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, ^uintptr(0), uintptr(base), ^uintptr(0)); e != 0 {
			errc <- fmt.Errorf("take the session's user id %d to own its user namespace: %w", base, e)
			return
		}
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var caps [2]unix.CapUserData
		if err := unix.Capget(&hdr, &caps[0]); err != nil {
			errc <- fmt.Errorf("read the thread's capabilities: %w", err)
			return
		}
		for i := range caps {
			caps[i].Effective = caps[i].Permitted
		}
		if err := unix.Capset(&hdr, &caps[0]); err != nil {
			errc <- fmt.Errorf("raise the thread's capabilities: %w", err)
			return
		}
		start()
		errc <- nil
	}()
	return <-errc
}
