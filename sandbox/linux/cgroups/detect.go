// Package cgroups gives each agentbox session a control group that bounds
// its memory (and swap), process count and CPU time, and a cgroup2 subtree
// in which every command gets a child group so that its whole process tree
// can be killed at once, even after setsid or a double fork.
//
// Both hierarchies are detected at run time: cgroup v2 is used for the
// limits when its controllers are available, else the v1 controllers; the
// cgroup2 hierarchy is used for tracking even when it has no controllers
// (a "hybrid" host). What is enforced is reported, never assumed.
package cgroups

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// Host describes the cgroup hierarchies found on this machine.
type Host struct {
	// V2 is the cgroup2 mount point, or "" when there is none.
	V2 string
	// V2Controllers are the controllers available at the v2 root.
	V2Controllers []string
	// V1 maps a v1 controller name (memory, pids, cpu) to its mount point.
	V1 map[string]string
	// FavorDynMods says a cgroup hierarchy is mounted with favordynmods:
	// moving a thread between groups then does not wait out an RCU
	// grace period (see ThreadMoveCost).
	FavorDynMods bool
}

// Controllers the sessions are limited with.
const (
	Memory = "memory"
	Pids   = "pids"
	CPU    = "cpu"
)

// Detect reads /proc/self/mountinfo and the v2 root's controller list.
func Detect() (*Host, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("cgroups: read mount table: %w", err)
	}
	defer f.Close()
	h, err := parseMountinfo(f)
	if err != nil {
		return nil, err
	}
	if h.V2 != "" {
		b, err := os.ReadFile(filepath.Join(h.V2, "cgroup.controllers"))
		if err == nil {
			h.V2Controllers = strings.Fields(string(b))
		}
	}
	return h, nil
}

// parseMountinfo finds the cgroup hierarchies in a mount table in the
// format of /proc/self/mountinfo.
func parseMountinfo(r io.Reader) (*Host, error) {
	h := &Host{V1: map[string]string{}}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		// id parent maj:min root mountpoint opts ... - fstype source superopts
		fields := strings.Fields(sc.Text())
		sep := slices.Index(fields, "-")
		if sep < 5 || sep+2 >= len(fields) {
			continue
		}
		if fields[3] != "/" {
			// A bind of a sub-group (inside a container): not the root.
			continue
		}
		mnt, fstype, super := fields[4], fields[sep+1], fields[len(fields)-1]
		if (fstype == "cgroup" || fstype == "cgroup2") && slices.Contains(strings.Split(super, ","), "favordynmods") {
			h.FavorDynMods = true
		}
		switch fstype {
		case "cgroup2":
			if h.V2 == "" {
				h.V2 = mnt
			}
		case "cgroup":
			for _, opt := range strings.Split(super, ",") {
				switch opt {
				case Memory, Pids, CPU:
					if _, ok := h.V1[opt]; !ok {
						h.V1[opt] = mnt
					}
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("cgroups: read mount table: %w", err)
	}
	return h, nil
}

// Where says which hierarchy enforces a controller: "v2", "v1" or "" when
// it is not available. v2 is preferred; a controller bound to v1 is not
// available on v2 at the same time.
func (h *Host) Where(controller string) string {
	if h.V2 != "" && slices.Contains(h.V2Controllers, controller) {
		return "v2"
	}
	if _, ok := h.V1[controller]; ok {
		return "v1"
	}
	return ""
}

// Tracking reports how commands can be tracked for tree kills: "v1"
// (thread-exact, through the v1 pids hierarchy), "v2" (cgroup2, moved
// just after start) or "" (none).
func (h *Host) Tracking() string {
	if h.V1[Pids] != "" {
		return "v1"
	}
	if h.V2 != "" {
		return "v2"
	}
	return ""
}

// ThreadMoveCost says, when the session limits use cgroup v1 and no
// hierarchy is mounted with favordynmods, what that costs: the first move
// of a thread into a group after a quiet spell waits for the kernel's
// cgroup_threadgroup_rwsem to turn writer-side, an RCU grace period
// (about 15 ms on a HZ=250 kernel), once per session start. "" otherwise.
func (h *Host) ThreadMoveCost() string {
	v1 := false
	for _, c := range []string{Memory, Pids, CPU} {
		v1 = v1 || h.Where(c) == "v1"
	}
	if !v1 || h.FavorDynMods {
		return ""
	}
	return "cgroup v1 limits: each session start waits out one RCU grace period (~15 ms at HZ=250) to move its spawning thread into its groups; a cgroup hierarchy mounted with favordynmods (mount -o remount,favordynmods; Linux 6.0 or later) removes the wait at a small cost to every fork and exit on the host"
}

// SwapLimit reports whether memory+swap can be limited too, so that a
// memory bomb cannot escape into swap.
func (h *Host) SwapLimit() bool {
	switch h.Where(Memory) {
	case "v2":
		return true // memory.swap.max exists whenever swap accounting is on; set best effort
	case "v1":
		_, err := os.Stat(filepath.Join(h.V1[Memory], "memory.memsw.limit_in_bytes"))
		return err == nil
	}
	return false
}

// Base is the directory, under each hierarchy's root, holding agentbox's
// session groups.
const Base = "agentbox"

// Usable returns the part of h this process can create groups in: a
// hierarchy stays when its agentbox subtree, or the hierarchy root where
// that subtree would be made, is writable. Root can use them all; an
// unprivileged user, only a delegated subtree. The dropped hierarchies are
// named in the second result.
func (h *Host) Usable() (*Host, []string) {
	writable := func(root string) bool {
		if unix.Access(filepath.Join(root, Base), unix.W_OK) == nil {
			return true
		}
		_, err := os.Stat(filepath.Join(root, Base))
		return os.IsNotExist(err) && unix.Access(root, unix.W_OK) == nil
	}
	out := &Host{V1: map[string]string{}}
	var dropped []string
	if h.V2 != "" {
		if writable(h.V2) {
			out.V2, out.V2Controllers = h.V2, h.V2Controllers
		} else {
			dropped = append(dropped, "cgroup2 at "+h.V2)
		}
	}
	for c, p := range h.V1 {
		if writable(p) {
			out.V1[c] = p
		} else {
			dropped = append(dropped, c+" (v1) at "+p)
		}
	}
	slices.Sort(dropped)
	return out, dropped
}
