package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/agentbox/agentbox/sandbox/linux/cgroups"
	"github.com/agentbox/agentbox/sandbox/seccomp"
)

// inCgroup runs a host command inside a control group of its own with the
// limits `agentbox exec` sets by default, made before and removed after
// it: what a user who wants bwrap's confinement plus agentbox's resource
// limits has to add around bwrap, and so the peer whose confinement is
// comparable in full. The group is made with agentbox's own cgroups
// package, and the command is born inside it the way a session's
// commands are: cgroup2 through clone3 into the group; cgroup v1 by
// forking from a thread that has moved into the groups (a v1 process
// cannot be born in a group, and moving it after it started would let it
// fork first).
type inCgroup struct {
	host   *cgroups.Host
	limits cgroups.Limits
	// filter, when set, is a seccomp program (struct sock_filter array)
	// handed to the command on fd 3: bwrap's --seccomp 3.
	filter []byte
}

func newInCgroup(l cgroups.Limits) (*inCgroup, error) {
	h, err := cgroups.Detect()
	if err != nil {
		return nil, err
	}
	h, _ = h.Usable()
	return &inCgroup{host: h, limits: l}, nil
}

// time runs argv in a fresh group and returns how long it all took:
// making the group and writing its limits, the run, removing the group.
func (p *inCgroup) time(argv []string) (time.Duration, error) {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "bench-peer-" + hex.EncodeToString(b)
	start := time.Now()
	g, err := p.host.Create(name, p.limits)
	if err != nil {
		return 0, fmt.Errorf("create group %s: %w", name, err)
	}
	errc := make(chan [2]error, 1)
	go func() {
		runErr, backErr := runInGroup(p.host, g, argv, p.filter)
		errc <- [2]error{runErr, backErr}
	}()
	e := <-errc
	runErr, backErr := e[0], e[1]
	if backErr != nil {
		return 0, fmt.Errorf("%w (group %s left in place)", backErr, name)
	}
	rmErr := g.Remove()
	d := time.Since(start)
	if runErr != nil {
		return d, runErr
	}
	if rmErr != nil {
		return d, fmt.Errorf("remove group %s: %w", name, rmErr)
	}
	return d, nil
}

// runInGroup runs argv to completion from a locked thread placed in g's
// v1 groups for the fork, and moved back where it was before g is
// removed (Remove kills what is left in a group: this process, were the
// thread left there). The thread moves itself, writing "0", the cheapest
// move there is (no global lock, so no RCU grace period), as a session's
// spawning thread does.
func runInGroup(h *cgroups.Host, g *cgroups.Group, argv []string, filter []byte) (runErr, backErr error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	home, err := threadGroups()
	if err != nil {
		return err, nil
	}
	var moved []string // the controllers the thread moved in
	defer func() {
		for _, c := range moved {
			if err := os.WriteFile(filepath.Join(h.V1[c], home[c], "tasks"), []byte("0"), 0); err != nil {
				// Left in the group, the thread must not serve this
				// process again, nor the group be removed (which would
				// kill this process): the caller stops.
				backErr = fmt.Errorf("move the forking thread back out of %s: %w", g.Dir(c), err)
				runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
			}
		}
	}()
	for _, c := range []string{cgroups.Memory, cgroups.Pids, cgroups.CPU} {
		d := g.Dir(c)
		if d == "" {
			continue
		}
		if _, ok := home[c]; !ok {
			return fmt.Errorf("the %s hierarchy is not in /proc/thread-self/cgroup", c), nil
		}
		if err := os.WriteFile(filepath.Join(d, "tasks"), []byte("0"), 0); err != nil {
			return fmt.Errorf("move the forking thread into %s: %w", d, err), nil
		}
		moved = append(moved, c)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if filter != nil {
		// The program fits a pipe's buffer: written whole, it is read by
		// bwrap to the end.
		r, w, err := os.Pipe()
		if err != nil {
			return fmt.Errorf("pipe for the seccomp filter: %w", err), nil
		}
		defer r.Close()
		_, err = w.Write(filter)
		w.Close()
		if err != nil {
			return fmt.Errorf("write the seccomp filter: %w", err), nil
		}
		cmd.ExtraFiles = []*os.File{r}
	}
	if v2 := g.Dir("v2"); v2 != "" {
		f, err := os.Open(v2)
		if err != nil {
			return fmt.Errorf("open %s: %w", v2, err), nil
		}
		defer f.Close()
		cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(f.Fd())}
	}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("run %q in its group: %w: %s", argv, err, bytes.TrimSpace(errb.Bytes())), nil
	}
	return nil, nil
}

// threadGroups maps each v1 controller (memory, pids, cpu, ...) to the
// calling thread's group path in its hierarchy, from
// /proc/thread-self/cgroup.
func threadGroups() (map[string]string, error) {
	f, err := os.Open("/proc/thread-self/cgroup")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// hierarchy-id:controller-list:path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 || parts[1] == "" {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// seccompProgram is agentbox's seccomp filter (the one every session
// command runs under) as the raw struct sock_filter array bwrap's
// --seccomp reads.
func seccompProgram() ([]byte, error) {
	prog, err := seccomp.Filter()
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, 8*len(prog))
	for _, ins := range prog {
		b = binary.NativeEndian.AppendUint16(b, ins.Code)
		b = append(b, ins.Jt, ins.Jf)
		b = binary.NativeEndian.AppendUint32(b, ins.K)
	}
	return b, nil
}
