package snapshot

import (
	"fmt"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/atfile"
)

// walker lists a source tree without following symlinks. It opens every
// directory relative to its parent's descriptor with O_NOFOLLOW, so a
// directory swapped for a symlink while the walk runs (say, by the agent in
// a live sandbox) cannot lead it outside the tree.
type walker struct {
	exclude map[string]bool
	entries []Entry
	skipped []Skipped
	limits  Limits
}

// walkTree lists root's tree (root itself as ".") in path order.
func walkTree(root string, exclude map[string]bool, lim Limits) ([]Entry, []Skipped, error) {
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open %s: %w", root, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, nil, fmt.Errorf("stat %s: %w", root, err)
	}
	w := &walker{exclude: exclude, limits: lim}
	w.entries = append(w.entries, Entry{Path: ".", Type: TypeDir, Mode: st.Mode & 0o7777, MTime: statTime(st.Mtim)})
	if err := w.dir(fd, "."); err != nil {
		return nil, nil, err
	}
	slices.SortFunc(w.entries[1:], func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
	return w.entries, w.skipped, nil
}

func (w *walker) skip(p, format string, args ...any) {
	w.skipped = append(w.skipped, Skipped{Path: p, Reason: fmt.Sprintf(format, args...)})
}

// dir lists the directory open at fd (rel is its path) and recurses; it
// closes fd.
func (w *walker) dir(fd int, rel string) error {
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("list %s: %w", rel, err)
	}
	slices.Sort(names)
	for _, name := range names {
		p := path.Join(rel, name)
		if w.exclude[p] {
			continue
		}
		if int64(len(w.entries)) >= w.limits.MaxEntries {
			return fmt.Errorf("the tree has more than %d entries (the store's limit)", w.limits.MaxEntries)
		}
		if len(p) > maxPathLen {
			w.skip(p[:64]+"...", "path longer than %d bytes", maxPathLen)
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if err == unix.ENOENT { // removed while we walk
				continue
			}
			return fmt.Errorf("stat %s: %w", p, err)
		}
		e := Entry{Path: p, Mode: st.Mode & 0o7777, MTime: statTime(st.Mtim)}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			// Hard links are stored as separate files (their content is
			// stored once, being the same).
			e.Type, e.Size = TypeFile, st.Size
			w.entries = append(w.entries, e)
		case unix.S_IFDIR:
			e.Type = TypeDir
			w.entries = append(w.entries, e)
			cfd, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				return fmt.Errorf("open directory %s: %w", p, err)
			}
			if err := w.dir(cfd, p); err != nil {
				return err
			}
		case unix.S_IFLNK:
			target, err := atfile.Readlink(fd, name)
			if err != nil {
				return fmt.Errorf("read symlink %s: %w", p, err)
			}
			if err := checkLinkTarget(p, target); err != nil {
				w.skip(p, "%v", err)
				continue
			}
			e.Type, e.Target, e.Mode = TypeSymlink, target, 0o777
			w.entries = append(w.entries, e)
		default:
			w.skip(p, "special file (%s) is not stored", fileKind(st.Mode))
		}
	}
	return nil
}

func fileKind(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFIFO:
		return "fifo"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFCHR:
		return "character device"
	case unix.S_IFBLK:
		return "block device"
	}
	return fmt.Sprintf("type %o", mode&unix.S_IFMT)
}

func statTime(ts unix.Timespec) time.Time {
	return normTime(time.Unix(ts.Sec, ts.Nsec))
}

// normTime is t in UTC, or the Unix epoch when t cannot be written in a
// manifest (JSON times need a four-digit year).
func normTime(t time.Time) time.Time {
	t = t.UTC()
	if t.Year() < 1 || t.Year() > 9999 {
		return time.Unix(0, 0).UTC()
	}
	return t
}
