package linux

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/agentbox/agentbox/internal/beneath"
	"github.com/agentbox/agentbox/sandbox/linux/control"
	"golang.org/x/sys/unix"
)

// madeDir is a host directory the init may make as the mount point of a
// missing denied path (see coverMissing): Rel under Base, the workspace
// or a read-write mount's source.
type madeDir struct {
	Base string `json:"base"`
	Rel  string `json:"rel"`
	// Dev and Ino identify Base as it was at create time. Threat: a
	// read-write mount's source may lie inside the workspace, where the
	// command can rename it and put a link (to a host directory) or
	// another directory in its place; release must not follow.
	Dev uint64 `json:"dev,omitempty"`
	Ino uint64 `json:"ino,omitempty"`
}

// recordMadeDirs lists, before the init starts, the host directories it
// would make for the denied paths that are missing under the workspace or
// a read-write mount, deepest first, so that the session can remove them
// when it ends instead of leaving empty directories in the user's tree.
// Only what is missing now is listed: a directory that was there before
// the session is never the session's to remove. Paths the init would
// refuse (under a read-only mount or policy path, through a link or a
// file) or leave to another denied path's mask make nothing and are left
// out.
func recordMadeDirs(ws string, cfg *control.Config) []madeDir {
	type layer struct {
		target, source string
		readOnly       bool
	}
	layers := []layer{{cfg.Workdir, ws, false}}
	for _, m := range cfg.Mounts {
		layers = append(layers, layer{path.Clean(m.Target), m.Source, m.ReadOnly})
	}
	var out []madeDir
	seen := map[madeDir]bool{}
	for _, p := range cfg.Deny {
		p = path.Clean("/" + p)
		if control.UnderDenied(p, cfg.Deny) || within(p, cfg.ReadOnly) {
			continue
		}
		// The layer the sandbox sees at p is the deepest mount holding
		// it, the last one of equal depth (mounts stack in order).
		var top *layer
		for i := range layers {
			l := &layers[i]
			if within(p, []string{l.target}) && (top == nil || len(l.target) >= len(top.target)) {
				top = l
			}
		}
		if top == nil || top.readOnly || p == top.target {
			continue
		}
		parts := strings.Split(strings.TrimPrefix(p, top.target+"/"), "/")
		for i := range parts {
			fi, err := os.Lstat(filepath.Join(top.source, filepath.Join(parts[:i+1]...)))
			if err == nil && fi.IsDir() {
				continue
			}
			if errors.Is(err, os.ErrNotExist) {
				for j := len(parts); j > i; j-- {
					d := madeDir{Base: top.source, Rel: filepath.Join(parts[:j]...)}
					var st unix.Stat_t
					if unix.Stat(top.source, &st) == nil {
						d.Dev, d.Ino = st.Dev, st.Ino
					}
					if !seen[d] {
						seen[d] = true
						out = append(out, d)
					}
				}
			}
			break // made from here down, or refused by the init
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		return strings.Count(out[i].Rel, "/") > strings.Count(out[j].Rel, "/")
	})
	return out
}

// within reports whether the clean sandbox path p is one of dirs or lies
// inside one.
func within(p string, dirs []string) bool {
	for _, d := range dirs {
		d = path.Clean("/" + d)
		if p == d || strings.HasPrefix(p, d+"/") || d == "/" {
			return true
		}
	}
	return false
}

// removeMadeDirs removes the mount points a stopped session made for
// missing denied paths (listed deepest first), each only if it is still
// an empty directory: what the host put there meanwhile stays, and so
// does a parent that still holds anything. Threat: the workspace is
// shared, and the names may lead elsewhere by now, so each is reached
// from its base by descriptor without following a link (a link on the
// way leaves it alone) and removed with unlinkat, which never follows
// one either. A directory that another live session's init still masks
// is left too: removing it would undo that mask (a mount point removed
// in another namespace is unmounted), leaving the path to be made and
// written there.
func removeMadeDirs(made []madeDir) error {
	var errs []error
	for _, d := range made {
		dir, name, err := openParent(d, d.Rel)
		if err != nil {
			continue // gone, or no longer reached without a link
		}
		if !mountedElsewhere(dir, name) {
			err = unix.Unlinkat(dir, name, unix.AT_REMOVEDIR)
		}
		unix.Close(dir)
		switch err {
		case nil, unix.ENOENT, unix.ENOTEMPTY, unix.EEXIST, unix.ENOTDIR, unix.EBUSY:
		default:
			errs = append(errs, fmt.Errorf("remove mount point %s: %w", filepath.Join(d.Base, d.Rel), err))
		}
	}
	return errors.Join(errs...)
}

// openParent opens the directory holding rel under d's base, which must
// still be the directory recorded at create time, walking rel without
// following a link (package beneath), and returns it with rel's last name.
func openParent(d madeDir, rel string) (int, string, error) {
	base, err := unix.Open(d.Base, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, "", err
	}
	defer unix.Close(base)
	return beneath.OpenParent(base, rel, beneath.Options{Expect: beneath.Identity{Dev: d.Dev, Ino: d.Ino}})
}

// mountedElsewhere reports whether name in the directory dir is a mount
// point in the mount namespace of a live agentbox init (another session
// on the same workspace or mount source). It reads each init's mount
// table and compares the directory holding each mount point there with
// dir; when it cannot tell, it answers yes.
func mountedElsewhere(dir int, name string) bool {
	var want unix.Stat_t
	if err := unix.Fstat(dir, &want); err != nil {
		return true
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	for _, e := range procs {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !initAlive(pid, "") {
			continue
		}
		proc := "/proc/" + e.Name()
		table, err := os.ReadFile(proc + "/mountinfo")
		if err != nil {
			continue // gone meanwhile
		}
		for _, line := range strings.Split(string(table), "\n") {
			f := strings.Fields(line)
			if len(f) < 5 {
				continue
			}
			mp := unescapeMountinfo(f[4])
			if path.Base(mp) != name {
				continue
			}
			var st unix.Stat_t
			if unix.Stat(proc+"/root"+path.Dir(mp), &st) == nil && st.Dev == want.Dev && st.Ino == want.Ino {
				return true
			}
		}
	}
	return false
}

// unescapeMountinfo undoes the octal escapes (\040 for a space, and so
// on) of a path in /proc/PID/mountinfo.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, "\\") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }
