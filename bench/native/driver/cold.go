package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/agentbox/agentbox/sandbox"
)

// command is one contender that runs as a host command: run times it
// (timeCommand when nil).
type command struct {
	name string
	argv []string
	env  []string // added to this process's environment
	run  func(argv []string) (time.Duration, error)
}

func (c command) time() (time.Duration, error) {
	if c.run != nil {
		return c.run(c.argv)
	}
	return timeCommand(c.argv, c.env)
}

// timeCommand runs argv to completion and returns how long it took; a
// failure (or a non-zero exit) is an error that carries its stderr.
func timeCommand(argv, env []string) (time.Duration, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	if err != nil {
		return d, fmt.Errorf("run %q: %w: %s", argv, err, bytes.TrimSpace(errb.Bytes()))
	}
	return d, nil
}

// bwrapArgs is bubblewrap doing what an agentbox session does to a
// command: the same namespaces (plus a user namespace, which bwrap always
// makes), read-only host tool directories and the same /etc pieces, fresh
// /proc, minimal /dev, tmpfs /tmp and /dev/shm, the workspace read-write,
// a read-only root, uid 1000, no capabilities, a new session. It does
// not do what agentbox adds on top: cgroup limits, landlock, seccomp,
// rlimits, the control socket.
func bwrapArgs(bwrap, ws string, cmd ...string) []string {
	a := []string{bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
		"--uid", "1000", "--gid", "1000", "--hostname", "agentbox"}
	for _, d := range []string{"/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32"} {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if t, err := os.Readlink(d); err == nil {
				a = append(a, "--symlink", t, d)
			}
		case fi.IsDir():
			a = append(a, "--ro-bind", d, d)
		}
	}
	for _, f := range []string{"/etc/ssl", "/etc/ca-certificates", "/etc/alternatives", "/etc/ld.so.conf.d",
		"/etc/localtime", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/nsswitch.conf"} {
		a = append(a, "--ro-bind-try", f, f)
	}
	a = append(a, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/dev/shm",
		"--bind", ws, "/workspace", "--chdir", "/workspace", "--remount-ro", "/")
	return append(a, cmd...)
}

// unshareArgs is util-linux unshare with the same namespaces and nothing
// else: the floor of namespace creation from a C tool.
func unshareArgs(unshare string, cmd ...string) []string {
	return append([]string{unshare, "--mount", "--pid", "--net", "--ipc", "--uts", "--cgroup", "--fork"}, cmd...)
}

// libCold is one cold start through the library in this process:
// Create, Exec of true, Close, each timed.
type libCold struct {
	create, exec, close, total series
}

func (l *libCold) once(ctx context.Context, c sandbox.Client, spec sandbox.Spec) error {
	t0 := time.Now()
	s, err := c.Create(ctx, spec)
	if err != nil {
		return fmt.Errorf("create a session: %w", err)
	}
	t1 := time.Now()
	res, err := sandbox.Exec(ctx, s, sandbox.ExecRequest{Cmd: []string{"true"}})
	t2 := time.Now()
	cerr := s.Close(ctx)
	t3 := time.Now()
	if err != nil {
		return fmt.Errorf("exec true in session %s: %w", s.ID(), err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("exec true in session %s: exit %d", s.ID(), res.ExitCode)
	}
	if cerr != nil {
		return fmt.Errorf("close session %s: %w", s.ID(), cerr)
	}
	l.create.add(t1.Sub(t0))
	l.exec.add(t2.Sub(t1))
	l.close.add(t3.Sub(t2))
	l.total.add(t3.Sub(t0))
	return nil
}

// coldResult is the cold-start comparison.
type coldResult struct {
	cmds []*series // in the order of the commands
	lib  libCold
}

// runCold interleaves the contenders round by round, so that a drift in
// machine load hits all of them alike, and lets the machine rest gap
// before each run: a cold start is what a command pays after a quiet
// spell, as an agent's commands come. Back to back, a run finds kernel
// state the previous one left warm (an RCU grace period that cgroup v1
// thread moves wait for, for one, is skipped when another move just
// waited for it) and measures less than a user waits.
func runCold(ctx context.Context, n int, gap time.Duration, cmds []command, c sandbox.Client, spec sandbox.Spec) (*coldResult, error) {
	r := &coldResult{}
	for _, cm := range cmds {
		r.cmds = append(r.cmds, &series{name: cm.name})
	}
	// One unmeasured round warms the page cache and the dentry caches.
	for _, cm := range cmds {
		if _, err := cm.time(); err != nil {
			return nil, fmt.Errorf("warm-up of %s: %w", cm.name, err)
		}
	}
	var warm libCold
	if err := warm.once(ctx, c, spec); err != nil {
		return nil, fmt.Errorf("warm-up of the library cold start: %w", err)
	}
	for i := 0; i < n; i++ {
		for j := range cmds {
			k := (i + j) % len(cmds) // rotate who goes first
			time.Sleep(gap)
			d, err := cmds[k].time()
			if err != nil {
				return nil, fmt.Errorf("round %d of %s: %w", i, cmds[k].name, err)
			}
			r.cmds[k].add(d)
		}
		time.Sleep(gap)
		if err := r.lib.once(ctx, c, spec); err != nil {
			return nil, fmt.Errorf("round %d of the library cold start: %w", i, err)
		}
	}
	return r, nil
}
