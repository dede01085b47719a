package linux

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox/agentbox/sandbox/linux/cgroups"
	"github.com/agentbox/agentbox/sandbox/linux/control"
	"golang.org/x/sys/unix"
)

// What a native session holds on the host is known to the client through
// its state directory (StateDir/ID): List, Orphaned and Delete read it.
// When that directory goes while the session runs (a test's temporary
// directory removed after its server was killed, rm -rf by hand), the
// session is out of their sight: its init runs on and keeps its id slot,
// which counts as free once the directory is gone (ids.go), its workspace
// tmpfs or disk image stays mounted on the host, and its cgroups stay.
// Remains finds those from what the host itself shows, host-wide (every
// state directory, as the id slots and cgroups are the host's), and
// proves each one agentbox's and stateless before it is ended:
//
//   - an init is a process whose argv[0] is control.Marker, pid 1 of a pid
//     namespace of its own, whose arguments name its session and whose
//     environment the absolute state directory and the mount namespace
//     that path is seen in (control.Args); it is a remain when that namespace is this process's
//     and StateDir/ID does not exist. An init that names no state
//     directory (started by an agentbox from before) or another mount
//     namespace (a container's agentbox, a service with a private /tmp)
//     cannot be judged and is left, as are its session's mounts and
//     cgroups;
//   - a workspace mount is a tmpfs with source "agentbox-workspace", or an
//     ext4 on a loop device backed by DIR/ID/disk.img, mounted on
//     DIR/ID.workspace; it is a remain when DIR/ID does not exist, no state
//     in DIR names it as its workspace (a session rebuilt on it does), and
//     no live init has its file system mounted or names session ID;
//   - a cgroup is Base/ID in a hierarchy the client uses; it is a remain
//     when no live init names session ID and no process is in it, or when
//     its session's init is itself a remain. An empty group younger than
//     groupGrace is left: a session being made has its group before its
//     init.
//
// The order of the list is the order to end them in: inits first (their
// end frees their mounts and groups), then mounts, then groups.

// groupGrace is how old an empty group of no known init must be to be a
// remain: far longer than a session start (startTimeout) takes.
const groupGrace = time.Minute

// A Remain is one thing a native session left on the host with no state
// to name it; End removes it.
type Remain struct {
	// Session is the id of the session it belonged to.
	Session string
	// What names it: "init pid N", "workspace mount DIR (tmpfs)", "cgroup DIR".
	What string
	// Why says why it is a remain.
	Why string
	end func() error
}

// End removes the remain: kills the init, unmounts the workspace (and
// detaches its loop device), removes the cgroup.
func (r Remain) End() error {
	if r.end == nil {
		return fmt.Errorf("%q of session %q: not a remain Remains listed", r.What, r.Session)
	}
	if err := r.end(); err != nil {
		return fmt.Errorf("%s of session %s: %w", r.What, r.Session, err)
	}
	return nil
}

// hostInit is an agentbox init found among the host's processes.
type hostInit struct {
	pid  int
	args control.Args
	// stateless says it is provably a remain: see Remains.
	stateless bool
	dir       string // StateDir/ID
}

// Remains lists what native sessions left on the host with no state to
// name them (see above). Not as root it looks at this user's inits only:
// an unprivileged client mounts nothing on the host, and its cgroups, if
// any, are delegated ones it leaves to their owner.
func (c *Client) Remains() ([]Remain, error) {
	inits, err := findInits(!c.rootless)
	if err != nil {
		return nil, err
	}
	live := map[string]bool{}
	stateless := map[string]bool{}
	var out []Remain
	for _, in := range inits {
		if !in.stateless {
			live[in.args.ID] = true
			continue
		}
		stateless[in.args.ID] = true
		pid, id, dir := in.pid, in.args.ID, in.dir
		out = append(out, Remain{Session: id, What: "init pid " + strconv.Itoa(pid),
			Why: fmt.Sprintf("its session directory %s is gone", dir),
			end: func() error {
				// Checked again: only an init whose directory is gone is
				// killed (killInit makes sure the pid is still its).
				if _, err := os.Lstat(dir); err == nil {
					return fmt.Errorf("its session directory %s is there again: not killed", dir)
				} else if !errors.Is(err, fs.ErrNotExist) {
					return fmt.Errorf("not killed: %w", err)
				}
				killInit(pid, id)
				if initAlive(pid, id) {
					return errors.New("it still runs after SIGKILL")
				}
				return nil
			}})
	}
	if c.rootless {
		return out, nil
	}
	mounts, err := c.mountRemains(inits, live)
	if err != nil {
		return nil, err
	}
	out = append(out, mounts...)
	groups, err := c.groupRemains(live, stateless)
	if err != nil {
		return nil, err
	}
	return append(out, groups...), nil
}

// findInits lists the host's agentbox inits (this user's only unless
// all), each judged stateless or not.
func findInits(all bool) ([]hostInit, error) {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	mntns, err := mountNS("self")
	if err != nil {
		return nil, err
	}
	var out []hostInit
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + p.Name() + "/cmdline")
		if err != nil {
			continue // gone meanwhile, or not ours to read
		}
		argv := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
		if argv[0] != control.Marker || !initAlive(pid, "") {
			continue
		}
		if !all && !ownProcess(pid) {
			continue
		}
		in := hostInit{pid: pid}
		args, err := control.ParseArgs(argv[1:])
		if err == nil && args.StateDir == "" {
			// Its environment names its state directory (an init of an
			// agentbox before named it in its arguments, or not at all).
			if env, rerr := os.ReadFile("/proc/" + p.Name() + "/environ"); rerr == nil {
				err = args.ReadEnv(strings.Split(strings.TrimSuffix(string(env), "\x00"), "\x00"))
			}
		}
		in.args = args // what it says of itself even when it is not understood: its session is spared
		if err == nil && validID(args.ID) && filepath.IsAbs(args.StateDir) && args.MountNS == mntns && pidNamespaceInit(pid) {
			in.dir = filepath.Join(args.StateDir, args.ID)
			_, err := os.Lstat(in.dir)
			in.stateless = errors.Is(err, fs.ErrNotExist)
		}
		out = append(out, in)
	}
	return out, nil
}

// mountNS is the inode of the mount namespace of /proc/<pid> ("self").
func mountNS(pid string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/"+pid+"/ns/mnt", &st); err != nil {
		return 0, fmt.Errorf("read the mount namespace of %s: %w", pid, err)
	}
	return st.Ino, nil
}

// pidNamespaceInit reports whether pid is pid 1 of a pid namespace below
// this process's, as every session init is.
func pidNamespaceInit(pid int) bool {
	f := statusField(pid, "NSpid")
	return len(f) >= 2 && f[len(f)-1] == "1"
}

// ownProcess reports whether pid runs with this process's real uid.
func ownProcess(pid int) bool {
	f := statusField(pid, "Uid")
	return len(f) > 0 && f[0] == strconv.Itoa(os.Getuid())
}

// statusField is the values of a field of /proc/PID/status.
func statusField(pid int, name string) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return nil
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return strings.Fields(v)
		}
	}
	return nil
}

// hostMount is a line of a mountinfo file.
type hostMount struct {
	dev, point, fstype, source string
}

// readMountinfo reads a mountinfo file (proc(5)).
func readMountinfo(file string) ([]hostMount, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []hostMount
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		a, b := strings.Fields(pre), strings.Fields(post)
		if !ok || len(a) < 5 || len(b) < 2 {
			continue
		}
		out = append(out, hostMount{dev: a[2], point: unescapeMountinfo(a[4]), fstype: b[0], source: unescapeMountinfo(b[1])})
	}
	return out, sc.Err()
}

// mountRemains lists the stateless sessions' workspace mounts.
func (c *Client) mountRemains(inits []hostInit, live map[string]bool) ([]Remain, error) {
	mounts, err := readMountinfo("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read the mount table: %w", err)
	}
	// The file systems live inits have mounted, and where. An init
	// starting has a copy of the host's whole mount table until it has
	// built its root (every workspace mount at the host's path): only a
	// mount elsewhere (the sandbox's workdir) is a use.
	var used map[string]map[string]bool
	var out []Remain
	for _, m := range mounts {
		id, ok := strings.CutSuffix(filepath.Base(m.point), ".workspace")
		if !ok || !validID(id) || !filepath.IsAbs(m.point) {
			continue
		}
		dir := filepath.Dir(m.point)
		img := filepath.Join(dir, id, "disk.img")
		var kind string
		switch {
		case m.fstype == "tmpfs" && m.source == "agentbox-workspace":
			kind = "tmpfs"
		case m.fstype == "ext4" && strings.HasPrefix(m.source, "/dev/loop") && loopBacking(m.source) == img:
			kind = "disk image " + m.source
		default:
			continue
		}
		if live[id] || workspaceClaimed(dir, id, m.point) {
			continue
		}
		if used == nil {
			used = map[string]map[string]bool{}
			for _, in := range inits {
				if in.stateless {
					continue
				}
				theirs, err := readMountinfo("/proc/" + strconv.Itoa(in.pid) + "/mountinfo")
				if err != nil {
					continue // gone meanwhile
				}
				for _, t := range theirs {
					if used[t.dev] == nil {
						used[t.dev] = map[string]bool{}
					}
					used[t.dev][t.point] = true
				}
			}
		}
		if len(used[m.dev]) > 1 || len(used[m.dev]) == 1 && !used[m.dev][m.point] {
			continue
		}
		point, source := m.point, m.source
		out = append(out, Remain{Session: id, What: fmt.Sprintf("workspace mount %s (%s)", point, kind),
			Why: fmt.Sprintf("its session directory %s is gone and no live session uses it", filepath.Join(dir, id)),
			end: func() error {
				// Under the directory's lock, which a Rebuild adopting a
				// workspace there holds from before it removes the gone
				// session's directory until its new one has its own: the
				// check below cannot fall between the two.
				unlock, err := lockDir(dir, unix.LOCK_EX)
				if err != nil {
					return err
				}
				defer unlock()
				if workspaceClaimed(dir, id, point) {
					return errors.New("a session has claimed it since it was listed")
				}
				if kind == "tmpfs" {
					if err := unix.Unmount(point, unix.MNT_DETACH); err != nil && err != unix.EINVAL && err != unix.ENOENT {
						return fmt.Errorf("unmount: %w", err)
					}
				} else {
					unmountDisk(point)
					if err := detachLoop(source, img); err != nil {
						return err
					}
				}
				_ = os.Remove(point) // the mount point, empty once unmounted
				return nil
			}})
	}
	return out, nil
}

// workspaceClaimed reports whether a state in the state directory dir
// may own the workspace ws of session id: id's own directory is there,
// a state there names ws (a session rebuilt on it), or a session there
// is being made (a directory with no state yet: a rebuild adopts the
// workspace before it writes its state).
func workspaceClaimed(dir, id, ws string) bool {
	if _, err := os.Lstat(filepath.Join(dir, id)); !errors.Is(err, fs.ErrNotExist) {
		return true
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return true
	}
	for _, e := range entries {
		if !e.IsDir() || !validID(e.Name()) {
			continue // ID.workspace and the like
		}
		st, err := readState(filepath.Join(dir, e.Name()))
		if err != nil || filepath.Clean(st.Workspace) == ws {
			return true
		}
	}
	return false
}

// loopBacking is the file loop device dev is backed by ("" when none),
// without the " (deleted)" the kernel adds once it is unlinked.
func loopBacking(dev string) string {
	b, err := os.ReadFile(filepath.Join("/sys/block", filepath.Base(dev), "loop", "backing_file"))
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(strings.TrimSpace(string(b)), " (deleted)")
}

// detachLoop detaches loop device dev from img, should it still be
// attached once its file system is unmounted (it detaches itself when it
// was attached with autoclear, as mountDisk does, and nothing else holds
// it).
func detachLoop(dev, img string) error {
	if loopBacking(dev) != img {
		return nil
	}
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open %s to detach it: %w", dev, err)
	}
	defer f.Close()
	if err := unix.IoctlSetInt(int(f.Fd()), unix.LOOP_CLR_FD, 0); err != nil && err != unix.ENXIO {
		return fmt.Errorf("detach %s from %s: %w", dev, img, err)
	}
	return nil
}

// groupRemains lists the cgroups of sessions that no live init names.
func (c *Client) groupRemains(live, stateless map[string]bool) ([]Remain, error) {
	names, err := c.cg.Names()
	if err != nil {
		return nil, err
	}
	var out []Remain
	for _, id := range names {
		if !validID(id) || live[id] {
			continue
		}
		g := c.cg.Open(id)
		why := "its session's directory is gone (its init is listed above)"
		if !stateless[id] {
			if g.Populated() || time.Since(g.Made()) < groupGrace {
				continue
			}
			why = "no process is in it and no init of its session runs"
		}
		var dirs []string
		for _, h := range []string{"v2", cgroups.Memory, cgroups.Pids, cgroups.CPU} {
			if d := g.Dir(h); d != "" && dirExists(d) {
				dirs = append(dirs, d)
			}
		}
		if len(dirs) == 0 {
			continue
		}
		out = append(out, Remain{Session: id, What: "cgroup " + strings.Join(dirs, ", "), Why: why, end: func() error {
			// Removing a group kills what is in it: only an empty one is
			// removed. Its session's init, when it was a remain, was
			// ended just before, and its processes with it.
			if !emptied(g, groupDrain) {
				return errors.New("processes are in it: not removed")
			}
			return g.Remove()
		}})
	}
	return out, nil
}

// groupDrain is how long a group may take to empty once its session's
// init is killed (the kernel ends the rest of its pid namespace).
const groupDrain = 3 * time.Second

// emptied reports whether no process is in g, waiting up to d for it.
func emptied(g *cgroups.Group, d time.Duration) bool {
	for deadline := time.Now().Add(d); g.Populated(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// lockDir takes a flock(2) on directory dir, shared or exclusive (how),
// and returns what releases it. A Rebuild that adopts a workspace holds
// its directory's lock shared; gc takes it exclusive to unmount a
// workspace there (see mountRemains).
func lockDir(dir string, how int) (unlock func(), err error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s to lock it: %w", dir, err)
	}
	for {
		err = unix.Flock(fd, how)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return func() { _ = unix.Close(fd) }, nil
}
