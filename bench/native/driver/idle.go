package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/linux"
)

// idleResult is what an idle session costs the host.
type idleResult struct {
	mem   procMem
	procs []string
	// init is the program the init runs (from /proc/PID/exe).
	init string
}

// settle is how long a session is left alone before it is measured, so
// that what its start-up allocated has been collected.
const settle = 500 * time.Millisecond

// idleLib measures a session made through the library by this process:
// its init (whatever program c starts) and every host process under it,
// after one exec and a pause. The egress proxy, when a session has one,
// runs in the client process and is not part of this figure.
func idleLib(ctx context.Context, c sandbox.Client, spec sandbox.Spec) (*idleResult, error) {
	s, err := c.Create(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("create a session: %w", err)
	}
	defer s.Close(ctx)
	if _, err := sandbox.Exec(ctx, s, sandbox.ExecRequest{Cmd: []string{"true"}}); err != nil {
		return nil, fmt.Errorf("exec true: %w", err)
	}
	time.Sleep(settle)
	pid, err := linux.InitPID(s.State())
	if err != nil {
		return nil, fmt.Errorf("session %s has no init_pid handle: %w", s.ID(), err)
	}
	m, names, err := treeMem("/proc", pid)
	if err != nil {
		return nil, err
	}
	return &idleResult{mem: m, procs: names, init: exeOf(pid)}, nil
}

// idleCLI measures the session of `agentbox exec -- sleep` as installed
// (the init is agentbox-init when it sits next to agentbox, else agentbox
// itself): the init and its host-side helpers, not the sleeping workload.
// It also returns the CLI process's own memory.
func idleCLI(agentbox string) (session *idleResult, client procMem, err error) {
	cmd := exec.Command(agentbox, "exec", "--", "sleep", "3")
	if err := cmd.Start(); err != nil {
		return nil, procMem{}, fmt.Errorf("start %s exec: %w", agentbox, err)
	}
	defer func() {
		if werr := cmd.Wait(); werr != nil && err == nil {
			err = fmt.Errorf("%s exec -- sleep 3: %w", agentbox, werr)
		}
	}()
	deadline := time.Now().Add(5 * time.Second)
	var initPid int
	for initPid == 0 || !hasChildNamed(initPid, "sleep") {
		if time.Now().After(deadline) {
			return nil, procMem{}, fmt.Errorf("no sandbox init running sleep under %s exec (pid %d) after 5s", agentbox, cmd.Process.Pid)
		}
		time.Sleep(10 * time.Millisecond)
		if initPid == 0 {
			initPid = childNamed(cmd.Process.Pid, "agentbox-linux-init")
		}
	}
	time.Sleep(settle)
	pids, err := tree("/proc", initPid)
	if err != nil {
		return nil, procMem{}, err
	}
	r := &idleResult{init: exeOf(initPid)}
	for _, pid := range pids {
		name := cmdline(pid)
		if strings.HasPrefix(name, "sleep") {
			continue // the workload, not the session's machinery
		}
		m, err := memOf("/proc", pid)
		if err != nil {
			return nil, procMem{}, err
		}
		r.mem.add(m)
		r.procs = append(r.procs, fmt.Sprintf("%d %s (PSS %s)", pid, name, mib(m.PSS)))
	}
	client, err = memOf("/proc", cmd.Process.Pid)
	if err != nil {
		return nil, procMem{}, err
	}
	return r, client, nil
}

// exeOf is the program pid runs.
func exeOf(pid int) string {
	p, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "exe"))
	if err != nil {
		return "unknown"
	}
	return p
}

func cmdline(pid int) string {
	b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	return strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " ")
}

// childNamed is a descendant of parent whose command line starts with
// name, or 0.
func childNamed(parent int, name string) int {
	pids, err := tree("/proc", parent)
	if err != nil {
		return 0
	}
	for _, pid := range pids[1:] {
		if strings.HasPrefix(cmdline(pid), name) {
			return pid
		}
	}
	return 0
}

func hasChildNamed(parent int, name string) bool { return childNamed(parent, name) != 0 }
