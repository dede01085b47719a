package nsinit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentbox/agentbox/sandbox/linux/control"
	"golang.org/x/sys/unix"
)

// spawner owns the confined thread that forks every command.
type spawner struct {
	reqs chan spawnReq
	// join is how many v1 group directories (from control.FdJoinFirst) the
	// thread joins.
	join int
	// track is the session's tracking group directory (fd), -1 if none;
	// thread says a single thread can be moved into a group (cgroup v1).
	track  int
	thread bool
	// next is the group of the next command, made ahead, which (with
	// v1) the spawning thread already sits in: a command's spawn then
	// starts with its fork, and the thread moves once per command, not
	// in and back out. Only the holder of the placement token touches
	// it.
	next *group
	// placed holds the placement token (see acquire).
	placed chan struct{}
	// cfg hands the config to the thread once the root is built; ready
	// is its answer: confined, or why not.
	cfg   chan *control.Config
	ready chan spawnerReady
}

type spawnerReady struct {
	report string
	err    error
}

// spawnReq asks the spawning thread to fork a command or, when move is
// set, to move itself into a group.
type spawnReq struct {
	path  string
	argv  []string
	attr  *syscall.ProcAttr
	move  func() error
	reply chan spawnRes
}

type spawnRes struct {
	pid int
	err error
}

// startSpawner starts the spawning thread (a new thread takes the
// runtime ~0.5 ms to start here: it is started first thing, while the
// config is read). It joins the session's groups (their directories came
// with the init's start) and the first command's and drops its
// privileges while the root is built, then waits for confine to finish
// its confinement.
func startSpawner(args control.Args) *spawner {
	s := &spawner{reqs: make(chan spawnReq), join: args.Join, track: -1,
		cfg: make(chan *control.Config, 1), ready: make(chan spawnerReady, 1), placed: make(chan struct{}, 1)}
	if args.Tracking != "" {
		s.track = control.FdTracking
		s.thread = args.Tracking == "v1"
	}
	go func() {
		// Locked and never unlocked: the runtime retires the thread with
		// the goroutine, so no other goroutine ever runs confined (or, in
		// the other direction, nothing here runs unconfined). Threads the
		// runtime starts later are cloned by its template thread, never
		// by a locked one, so none inherits these groups or this
		// confinement.
		runtime.LockOSThread()
		err := s.joinGroups()
		if err == nil {
			s.prepare(1, moveSelf) // the first command's group, ahead like every next one's
		}
		s.placed <- struct{}{}
		if err == nil {
			err = dropPrivileges()
		}
		cfg := <-s.cfg
		report := ""
		if err == nil {
			report, err = restrictLandlock(cfg)
		}
		s.ready <- spawnerReady{report, err}
		if err != nil {
			return
		}
		for r := range s.reqs {
			if r.move != nil {
				r.reply <- spawnRes{err: r.move()}
				continue
			}
			pid, err := syscall.ForkExec(r.path, r.argv, r.attr)
			r.reply <- spawnRes{pid, err}
		}
	}()
	return s
}

// confine confines the spawning thread for cfg (the root must be built)
// and waits until it is, or has failed.
func (s *spawner) confine(cfg *control.Config) (string, error) {
	s.cfg <- cfg
	r := <-s.ready
	if r.err != nil {
		return "", fmt.Errorf("confine the command thread: %w", r.err)
	}
	return r.report, nil
}

// joinGroups moves the spawning thread (only) into the session's v1
// groups, so that every command it forks is born inside the limits. It
// runs on the spawning thread.
func (s *spawner) joinGroups() error {
	for i := 0; i < s.join; i++ {
		if err := moveSelf(control.FdJoinFirst+i, "tasks"); err != nil {
			return fmt.Errorf("join session group (fd %d): %w", control.FdJoinFirst+i, err)
		}
		_ = unix.Close(control.FdJoinFirst + i)
	}
	return nil
}

// acquire takes the token of the spawning thread's placement: whoever
// holds it may fork a command, and spawn hands it back once the thread
// sits in the next command's group.
func (s *spawner) acquire() { <-s.placed }

// spawn starts command n confined; the caller holds the placement token
// (acquire) and the reaper lock, so that the child cannot be reaped
// before it is registered. spawn hands the token back, at once or, when
// the thread must move on, once it has.
func (s *spawner) spawn(n uint64, path string, argv []string, attr *syscall.ProcAttr) (int, *group, error) {
	g := s.next
	s.next = nil
	if g != nil && g.n != n {
		s.leave(g)
		g.remove()
		g = nil
	}
	if g == nil {
		g = s.newGroup(n)
		if g != nil && s.thread {
			// Threat: a command escaping its group by forking at once.
			// With v1, the forking thread itself sits in the command's
			// group, so the child is born in it.
			if err := s.moveThread(g.s.track, filepath.Join(g.name, "tasks")); err != nil {
				s.leave(g)
				g.remove()
				s.placed <- struct{}{}
				return 0, nil, fmt.Errorf("move the spawning thread into group %s: %w", g.name, err)
			}
		}
	}
	reply := make(chan spawnRes, 1)
	s.reqs <- spawnReq{path: path, argv: argv, attr: attr, reply: reply}
	r := <-reply
	if g != nil && s.thread {
		// Out of the command's group before it can be removed (rmdir
		// fails while the thread is in it): into the next command's group
		// when it can be made, else back to the session group. This runs
		// off the command's path. The confined thread cannot open its
		// cgroup files (they are outside its landlock domain and it has
		// no capabilities left): an unconfined goroutine makes the group
		// and opens its tasks file, and the thread writes itself in
		// through that descriptor (see moveSelf).
		go func() {
			if !s.prepare(n+1, s.moveThread) {
				if err := s.moveThread(s.track, "tasks"); err != nil {
					fmt.Fprintf(os.Stderr, "agentbox init: move the spawning thread back: %v\n", err)
				}
			}
			s.leave(g)
			s.placed <- struct{}{}
		}()
	} else {
		s.leave(g)
		s.placed <- struct{}{}
	}
	if r.err != nil {
		if g != nil {
			<-g.left
			g.remove()
		}
		return 0, nil, r.err
	}
	if g != nil && !s.thread {
		_ = g.write("cgroup.procs", strconv.Itoa(r.pid))
	}
	return r.pid, g, nil
}

// leave records that the spawning thread is out of g (or never was in).
func (s *spawner) leave(g *group) {
	if g != nil {
		close(g.left)
	}
}

// group is one command's tracking group, or none.
type group struct {
	n    uint64
	name string
	s    *spawner
	// left is closed once the spawning thread is out of the group: it
	// can then be removed.
	left chan struct{}
}

// prepare makes command n's group and moves the spawning thread into it
// (v1 tracking only), so that command n's spawn starts with its fork.
// move moves the thread: moveSelf on the thread itself, moveThread from
// any other goroutine.
func (s *spawner) prepare(n uint64, move func(dirfd int, file string) error) bool {
	if !s.thread {
		return false
	}
	g := s.newGroup(n)
	if g == nil {
		return false
	}
	if err := move(s.track, filepath.Join(g.name, "tasks")); err != nil {
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
	return &group{n: n, name: name, s: s, left: make(chan struct{})}
}

func (g *group) write(file, value string) error {
	return writeAt(g.s.track, filepath.Join(g.name, file), value)
}

// moveSelf moves the calling thread (and only it) into the v1 group whose
// tasks file is file under dirfd, by writing "0" to it. The kernel takes
// "0" for the writer itself, and moves the writer without the global
// lock that a move of any other thread (or of a whole process) takes:
// the first such lock after a quiet spell waits out an RCU grace period
// (~15 ms at HZ=250 on a host whose cgroup2 is mounted without
// favordynmods), which is paid on every session start otherwise.
func moveSelf(dirfd int, file string) error {
	return writeAt(dirfd, file, "0")
}

// moveThread moves the spawning thread, from any other goroutine, into
// the v1 group whose tasks file is file under dirfd: the caller opens the
// file (the confined thread could not), the thread writes itself in
// through the descriptor. Landlock checks opens, not writes, and a v1
// move is allowed by the credentials the file was opened with.
func (s *spawner) moveThread(dirfd int, file string) error {
	fd, err := unix.Openat(dirfd, file, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	reply := make(chan spawnRes, 1)
	s.reqs <- spawnReq{move: func() error {
		_, err := unix.Write(fd, []byte("0"))
		return err
	}, reply: reply}
	return (<-reply).err
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
		// The init (pid 1) is listed while its spawning thread has not
		// yet moved on; it leaves by itself.
		pids := slices.DeleteFunc(g.pids(), func(p int) bool { return p == 1 })
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
