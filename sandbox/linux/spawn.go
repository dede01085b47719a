package linux

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// spawner owns the confined thread that forks every command.
type spawner struct {
	reqs chan spawnReq
	tid  int
	cfg  *initConfig
	// track is the session's tracking group directory (fd), -1 if none;
	// thread says a single thread can be moved into a group (cgroup v1).
	track  int
	thread bool
	// next is the group of the next command, made ahead, which (with
	// v1) the spawning thread already sits in: a command's spawn then
	// starts with its fork, and the thread moves once per command, not
	// in and back out. Only spawn touches it (under the reaper lock).
	next *group
}

type spawnReq struct {
	path  string
	argv  []string
	attr  *syscall.ProcAttr
	reply chan spawnRes
}

type spawnRes struct {
	pid int
	err error
}

// startSpawner starts the confined thread and waits for it to be ready.
func startSpawner(cfg *initConfig, track int, thread bool) (*spawner, string, error) {
	s := &spawner{reqs: make(chan spawnReq), cfg: cfg, track: track, thread: thread}
	type ready struct {
		report string
		err    error
	}
	ch := make(chan ready, 1)
	go func() {
		// Locked and never unlocked: the runtime retires the thread with
		// the goroutine, so no other goroutine ever runs confined (or, in
		// the other direction, nothing here runs unconfined).
		runtime.LockOSThread()
		s.tid = unix.Gettid()
		report, err := "", s.joinGroups()
		if err == nil {
			report, err = confineThread(cfg)
		}
		ch <- ready{report, err}
		if err != nil {
			return
		}
		for r := range s.reqs {
			pid, err := syscall.ForkExec(r.path, r.argv, r.attr)
			r.reply <- spawnRes{pid, err}
		}
	}()
	r := <-ch
	if r.err != nil {
		return nil, "", fmt.Errorf("confine the command thread: %w", r.err)
	}
	return s, r.report, nil
}

// joinGroups moves the spawning thread (only) into the session's v1
// groups, so that every command it forks is born inside the limits.
func (s *spawner) joinGroups() error {
	for i := 0; i < s.cfg.JoinGroups; i++ {
		if err := writeAt(fdJoinFirst+i, "tasks", strconv.Itoa(s.tid)); err != nil {
			return fmt.Errorf("join session group (fd %d): %w", fdJoinFirst+i, err)
		}
		_ = unix.Close(fdJoinFirst + i)
	}
	return nil
}

// group is one command's tracking group, or none.
type group struct {
	name string
	s    *spawner
}

// spawn starts one command confined; the caller holds the reaper lock so
// that the child cannot be reaped before it is registered.
func (s *spawner) spawn(n uint64, path string, argv []string, attr *syscall.ProcAttr) (int, *group, error) {
	g := s.next
	s.next = nil
	if g == nil {
		g = s.newGroup(n)
		if g != nil && s.thread {
			// Threat: a command escaping its group by forking at once.
			// With v1, the forking thread itself sits in the command's
			// group, so the child is born in it.
			if err := g.write("tasks", strconv.Itoa(s.tid)); err != nil {
				g.remove()
				return 0, nil, fmt.Errorf("move the spawning thread into group %s: %w", g.name, err)
			}
		}
	}
	reply := make(chan spawnRes, 1)
	s.reqs <- spawnReq{path: path, argv: argv, attr: attr, reply: reply}
	r := <-reply
	if g != nil && s.thread {
		// Out of the command's group before anything can kill it (a kill
		// lists the group's processes: the init's, were the thread left
		// in it) or remove it: into the next command's group when it can
		// be made, else back to the session group.
		if !s.prepare(n + 1) {
			if err := writeAt(s.track, "tasks", strconv.Itoa(s.tid)); err != nil {
				fmt.Fprintf(os.Stderr, "agentbox init: move the spawning thread back: %v\n", err)
			}
		}
	}
	if r.err != nil {
		g.remove()
		return 0, nil, r.err
	}
	if g != nil && !s.thread {
		_ = g.write("cgroup.procs", strconv.Itoa(r.pid))
	}
	return r.pid, g, nil
}

// prepare makes command n's group and moves the spawning thread into it
// (v1 tracking only), so that command n's spawn starts with its fork.
func (s *spawner) prepare(n uint64) bool {
	if !s.thread {
		return false
	}
	g := s.newGroup(n)
	if g == nil {
		return false
	}
	if err := g.write("tasks", strconv.Itoa(s.tid)); err != nil {
		g.remove()
		return false
	}
	s.next = g
	return true
}

func (s *spawner) newGroup(n uint64) *group {
	if s.track < 0 {
		return nil
	}
	name := "e" + strconv.FormatUint(n, 10)
	if err := unix.Mkdirat(s.track, name, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
		fmt.Fprintf(os.Stderr, "agentbox init: create command group %s: %v\n", name, err)
		return nil
	}
	return &group{name: name, s: s}
}

func (g *group) write(file, value string) error {
	return writeAt(g.s.track, filepath.Join(g.name, file), value)
}

func writeAt(dirfd int, file, value string) error {
	fd, err := unix.Openat(dirfd, file, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	_, err = unix.Write(fd, []byte(value))
	return err
}

// pids lists the processes in the command's group.
func (g *group) pids() []int {
	fd, err := unix.Openat(g.s.track, filepath.Join(g.name, "cgroup.procs"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	f := os.NewFile(uintptr(fd), "cgroup.procs")
	defer f.Close()
	b := make([]byte, 64<<10)
	n, _ := f.Read(b)
	var out []int
	for _, w := range strings.Fields(string(b[:n])) {
		if p, err := strconv.Atoi(w); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// kill ends every process of the command: its group when it has one
// (cgroup.kill, else SIGKILL to each member until none is left), and its
// process group in any case.
func (g *group) kill(pid int) {
	_ = unix.Kill(-pid, unix.SIGKILL)
	_ = unix.Kill(pid, unix.SIGKILL)
	if g == nil {
		return
	}
	if !g.s.thread && g.write("cgroup.kill", "1") == nil {
		return
	}
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		pids := g.pids()
		if len(pids) == 0 {
			return
		}
		for _, p := range pids {
			_ = unix.Kill(p, unix.SIGKILL)
		}
		time.Sleep(time.Millisecond)
	}
}

// remove deletes the command's group; it reports false while processes
// are left in it (background children outliving the command).
func (g *group) remove() bool {
	if g == nil {
		return true
	}
	err := unix.Unlinkat(g.s.track, g.name, unix.AT_REMOVEDIR)
	return err == nil || errors.Is(err, unix.ENOENT)
}

// lookPath finds a command in the sandbox's PATH, as execvp would.
func lookPath(name, path string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		fi, err := os.Stat(p)
		if err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", os.ErrNotExist
}
