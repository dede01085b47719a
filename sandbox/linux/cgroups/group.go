package cgroups

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Limits bound a session. Zero fields are not limited.
type Limits struct {
	MemoryBytes int64
	Pids        int64
	CPUs        float64
	// Weight is the session's share of CPU time under contention, on
	// cgroup2's scale (100 is a default group's); 0 leaves the default.
	Weight int
}

// Group is one session's set of control groups, one directory per
// hierarchy in use.
type Group struct {
	host *Host
	name string
	// dirs maps "v2" and each v1 controller to the group's directory.
	dirs map[string]string
	// enforced lists what the limits are enforced with, for reports.
	enforced []string
}

// cpuPeriod is the CFS period used for CPU quotas, in microseconds.
const cpuPeriod = 100000

// Create makes the session's groups under Base in every hierarchy that
// enforces a requested limit, plus the cgroup2 tracking group, and writes
// the limits. A limit that cannot be enforced is an error naming it. On
// any failure nothing is left behind.
func (h *Host) Create(name string, l Limits) (g *Group, err error) {
	if name == "" || strings.ContainsAny(name, "/.") {
		return nil, fmt.Errorf("cgroups: bad group name %q", name)
	}
	g = &Group{host: h, name: name, dirs: map[string]string{}}
	defer func() {
		if err != nil {
			_ = g.Remove()
			g = nil
		}
	}()
	need := map[string]bool{Memory: l.MemoryBytes > 0, Pids: l.Pids > 0, CPU: l.CPUs > 0 || l.Weight > 0}
	if h.V2 != "" {
		var v2ctl []string
		for _, c := range []string{Memory, Pids, CPU} {
			if need[c] && h.Where(c) == "v2" {
				v2ctl = append(v2ctl, c)
			}
		}
		dir, err := h.mkV2(name, v2ctl)
		if err != nil {
			return g, err
		}
		g.dirs["v2"] = dir
	}
	for _, c := range []string{Memory, Pids, CPU} {
		// The v1 pids hierarchy is joined even without a pids limit: it
		// is where commands are tracked thread by thread (see Tracking).
		track := c == Pids && h.V1[Pids] != ""
		if !track && (!need[c] || h.Where(c) != "v1") {
			continue
		}
		dir := filepath.Join(h.V1[c], Base, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return g, fmt.Errorf("cgroups: create %s group: %w", c, err)
		}
		g.dirs[c] = dir
	}
	for _, c := range []string{Memory, Pids, CPU} {
		if need[c] && h.Where(c) == "" {
			return g, fmt.Errorf("cgroups: no %s controller on this host (neither cgroup v2 nor v1)", c)
		}
	}
	if err := g.setLimits(l); err != nil {
		return g, err
	}
	return g, nil
}

// mkV2 creates Base/name in the cgroup2 hierarchy with the given
// controllers enabled from the root down.
func (h *Host) mkV2(name string, controllers []string) (string, error) {
	base := filepath.Join(h.V2, Base)
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", fmt.Errorf("cgroups: create %s: %w", base, err)
	}
	if len(controllers) > 0 {
		var b strings.Builder
		for _, c := range controllers {
			b.WriteString("+" + c + " ")
		}
		for _, d := range []string{h.V2, base} {
			if err := writeFile(filepath.Join(d, "cgroup.subtree_control"), strings.TrimSpace(b.String())); err != nil {
				return "", fmt.Errorf("cgroups: enable %s below %s: %w", strings.Join(controllers, ","), d, err)
			}
		}
	}
	dir := filepath.Join(base, name)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("cgroups: create %s: %w", dir, err)
	}
	return dir, nil
}

func (g *Group) setLimits(l Limits) error {
	h := g.host
	if l.MemoryBytes > 0 {
		mem := strconv.FormatInt(l.MemoryBytes, 10)
		switch h.Where(Memory) {
		case "v2":
			d := g.dirs["v2"]
			if err := writeFile(filepath.Join(d, "memory.max"), mem); err != nil {
				return fmt.Errorf("cgroups: set memory limit: %w", err)
			}
			g.enforced = append(g.enforced, "memory (v2 memory.max)")
			if err := writeFile(filepath.Join(d, "memory.swap.max"), "0"); err == nil {
				g.enforced = append(g.enforced, "swap (v2 memory.swap.max=0)")
			}
		case "v1":
			d := g.dirs[Memory]
			if err := writeFile(filepath.Join(d, "memory.limit_in_bytes"), mem); err != nil {
				return fmt.Errorf("cgroups: set memory limit: %w", err)
			}
			g.enforced = append(g.enforced, "memory (v1 memory.limit_in_bytes)")
			if _, err := os.Stat(filepath.Join(d, "memory.memsw.limit_in_bytes")); err == nil {
				if err := writeFile(filepath.Join(d, "memory.memsw.limit_in_bytes"), mem); err != nil {
					return fmt.Errorf("cgroups: set memory+swap limit: %w", err)
				}
				g.enforced = append(g.enforced, "swap (v1 memory.memsw.limit_in_bytes)")
			}
		}
	}
	if l.Pids > 0 {
		d := g.dirs["v2"]
		if h.Where(Pids) == "v1" {
			d = g.dirs[Pids]
		}
		if err := writeFile(filepath.Join(d, "pids.max"), strconv.FormatInt(l.Pids, 10)); err != nil {
			return fmt.Errorf("cgroups: set pids limit: %w", err)
		}
		g.enforced = append(g.enforced, "pids ("+h.Where(Pids)+" pids.max)")
	}
	if l.Weight > 0 {
		switch h.Where(CPU) {
		case "v2":
			if err := writeFile(filepath.Join(g.dirs["v2"], "cpu.weight"), strconv.Itoa(l.Weight)); err != nil {
				return fmt.Errorf("cgroups: set cpu weight: %w", err)
			}
			g.enforced = append(g.enforced, "cpu share (v2 cpu.weight)")
		case "v1":
			shares := max(2, l.Weight*1024/100)
			if err := writeFile(filepath.Join(g.dirs[CPU], "cpu.shares"), strconv.Itoa(shares)); err != nil {
				return fmt.Errorf("cgroups: set cpu shares: %w", err)
			}
			g.enforced = append(g.enforced, "cpu share (v1 cpu.shares)")
		}
	}
	if l.CPUs > 0 {
		quota := int64(l.CPUs * cpuPeriod)
		if quota < 1000 {
			quota = 1000 // the kernel's minimum quota is 1 ms
		}
		switch h.Where(CPU) {
		case "v2":
			if err := writeFile(filepath.Join(g.dirs["v2"], "cpu.max"), fmt.Sprintf("%d %d", quota, cpuPeriod)); err != nil {
				return fmt.Errorf("cgroups: set cpu limit: %w", err)
			}
			g.enforced = append(g.enforced, "cpu (v2 cpu.max)")
		case "v1":
			d := g.dirs[CPU]
			if err := writeFile(filepath.Join(d, "cpu.cfs_period_us"), strconv.Itoa(cpuPeriod)); err != nil {
				return fmt.Errorf("cgroups: set cpu period: %w", err)
			}
			if err := writeFile(filepath.Join(d, "cpu.cfs_quota_us"), strconv.FormatInt(quota, 10)); err != nil {
				return fmt.Errorf("cgroups: set cpu limit: %w", err)
			}
			g.enforced = append(g.enforced, "cpu (v1 cpu.cfs_quota_us)")
		}
	}
	return nil
}

// Open names an existing session's groups (for Delete from saved state)
// without creating anything; directories that do not exist are skipped.
func (h *Host) Open(name string) *Group {
	g := &Group{host: h, name: name, dirs: map[string]string{}}
	if h.V2 != "" {
		g.dirs["v2"] = filepath.Join(h.V2, Base, name)
	}
	for c, mnt := range h.V1 {
		g.dirs[c] = filepath.Join(mnt, Base, name)
	}
	return g
}

// Enforced describes each limit in force and how, for logs and reports.
func (g *Group) Enforced() []string { return g.enforced }

// Tracking is the directory under which each command gets its own group,
// so that its whole tree can be killed. Thread is true for a v1 group
// (the v1 pids hierarchy), where a single thread can be moved: the init
// moves its spawning thread into the command's group before forking, so
// the command starts inside it with no window. Thread is false for a
// cgroup2 group, where the command is moved right after it starts (a
// command that forks within that window leaves a child outside its group,
// still inside the session's). dir is "" when neither exists.
func (g *Group) Tracking() (dir string, thread bool) {
	if d := g.dirs[Pids]; d != "" && g.host.V1[Pids] != "" {
		return d, true
	}
	return g.dirs["v2"], false
}

// Add moves pid into every group of the session.
func (g *Group) Add(pid int) error {
	for key, d := range g.dirs {
		if err := writeFile(filepath.Join(d, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
			return fmt.Errorf("cgroups: move pid %d into %s group: %w", pid, key, err)
		}
	}
	return nil
}

// AddV2 moves pid into the session's cgroup2 group only (where a process
// moves whole); a process that joins the v1 groups thread by thread uses
// ThreadDirs instead.
func (g *Group) AddV2(pid int) error {
	if d := g.dirs["v2"]; d != "" {
		if err := writeFile(filepath.Join(d, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
			return fmt.Errorf("cgroups: move pid %d into the v2 group: %w", pid, err)
		}
	}
	return nil
}

// ThreadDirs are the session's v1 group directories. cgroup v1 places
// threads, not processes, and a child is born in the groups of the thread
// that forked it: a process can keep its own threads outside the limits
// (so that they neither count against pids.max nor can be picked by the
// session's OOM killer) and fork the session's commands from one thread
// placed in these groups.
func (g *Group) ThreadDirs() []string {
	var out []string
	for _, c := range []string{Memory, Pids, CPU} {
		if d := g.dirs[c]; d != "" {
			out = append(out, d)
		}
	}
	return out
}

// OOMKills is how many processes the kernel's OOM killer ended in the
// session so far (0 when memory is not limited).
func (g *Group) OOMKills() uint64 {
	var file, key string
	switch {
	case g.host.Where(Memory) == "v2" && g.dirs["v2"] != "":
		file, key = filepath.Join(g.dirs["v2"], "memory.events"), "oom_kill"
	case g.dirs[Memory] != "":
		file, key = filepath.Join(g.dirs[Memory], "memory.oom_control"), "oom_kill"
	default:
		return 0
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == key {
			n, _ := strconv.ParseUint(f[1], 10, 64)
			return n
		}
	}
	return 0
}

// Kill sends SIGKILL to every process of the session: through
// cgroup.kill when cgroup2 has it, else to each listed pid.
func (g *Group) Kill() error {
	if d := g.dirs["v2"]; d != "" {
		if err := writeFile(filepath.Join(d, "cgroup.kill"), "1"); err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
	}
	for _, d := range g.dirs {
		for _, pid := range procs(d) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	return nil
}

// Remove kills what is left in the session's groups and removes their
// directories (children first). Removing what is gone is not an error.
func (g *Group) Remove() error {
	if g == nil {
		return nil
	}
	_ = g.Kill()
	var errs []error
	for key, d := range g.dirs {
		if err := removeTree(d); err != nil {
			errs = append(errs, fmt.Errorf("cgroups: remove %s group %s: %w", key, d, err))
		}
	}
	return errors.Join(errs...)
}

// removeTree removes a group and its child groups, bottom-up, waiting
// briefly for killed processes to leave.
func removeTree(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := removeTree(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		err := syscall.Rmdir(dir)
		if err == nil || errors.Is(err, syscall.ENOENT) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			return err
		}
		for _, pid := range procs(dir) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(time.Millisecond)
	}
}

// procs lists the pids in a group's cgroup.procs.
func procs(dir string) []int {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			pids = append(pids, n)
		}
	}
	return pids
}

// Empty reports whether no process is left in any of the session's groups.
func (g *Group) Empty() bool {
	for _, d := range g.dirs {
		if len(procs(d)) > 0 {
			return false
		}
	}
	return true
}

// Populated reports whether a process is in any of the session's groups
// or their child groups (the commands' tracking groups); a group that
// cannot be read counts as populated.
func (g *Group) Populated() bool {
	for _, d := range g.dirs {
		if populated(d) {
			return true
		}
	}
	return false
}

func populated(dir string) bool {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return false
	}
	if err != nil {
		return true
	}
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil && !errors.Is(err, os.ErrNotExist) || len(strings.TrimSpace(string(b))) > 0 {
		return true
	}
	for _, e := range entries {
		if e.IsDir() && populated(filepath.Join(dir, e.Name())) {
			return true
		}
	}
	return false
}

// Made is when the oldest of the session's group directories was made
// (a cgroup directory's modification time is its creation's); zero when
// none exists.
func (g *Group) Made() time.Time {
	var made time.Time
	for _, d := range g.dirs {
		if fi, err := os.Stat(d); err == nil && (made.IsZero() || fi.ModTime().Before(made)) {
			made = fi.ModTime()
		}
	}
	return made
}

// Names lists the groups under Base in every hierarchy h uses: one per
// session that has (or had, should it have left them) groups here.
func (h *Host) Names() ([]string, error) {
	roots := []string{}
	if h.V2 != "" {
		roots = append(roots, h.V2)
	}
	for _, mnt := range h.V1 {
		roots = append(roots, mnt)
	}
	seen := map[string]bool{}
	var names []string
	for _, root := range roots {
		entries, err := os.ReadDir(filepath.Join(root, Base))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("cgroups: list %s: %w", filepath.Join(root, Base), err)
		}
		for _, e := range entries {
			if e.IsDir() && !seen[e.Name()] {
				seen[e.Name()] = true
				names = append(names, e.Name())
			}
		}
	}
	slices.Sort(names)
	return names, nil
}

func writeFile(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, werr := f.WriteString(value)
	cerr := f.Close()
	if werr != nil {
		return werr
	}
	return cerr
}

// Dir is the group's directory in one hierarchy: "v2", or a v1
// controller name (memory, pids, cpu); "" when the group has none there.
func (g *Group) Dir(hierarchy string) string { return g.dirs[hierarchy] }

// Delegate gives the session's groups to the host ids uid and gid (the
// root of the session's user namespace), as far as its init needs them:
// the files through which its threads and commands are moved (tasks,
// cgroup.procs), and the tracking directory, where it makes a group per
// command. The limit files stay root's, so nothing in the session can
// raise its own limits.
func (g *Group) Delegate(uid, gid int) error {
	track, _ := g.Tracking()
	for _, dir := range g.dirs {
		if dir == track {
			if err := os.Lchown(dir, uid, gid); err != nil {
				return fmt.Errorf("cgroups: delegate %s: %w", dir, err)
			}
		}
		for _, f := range []string{"tasks", "cgroup.procs"} {
			err := os.Lchown(filepath.Join(dir, f), uid, gid)
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("cgroups: delegate %s: %w", filepath.Join(dir, f), err)
			}
		}
	}
	return nil
}
