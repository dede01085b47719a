package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/sandbox"
)

// RestoreOptions tune a restore.
type RestoreOptions struct {
	// Progress, when set, is called with content bytes done and the total.
	Progress func(done, total int64)
	// MaxBytes, when positive, refuses a snapshot whose file sizes
	// (holes included) total more: the disk limit of the session it seeds.
	MaxBytes int64
}

// Restore writes snapshot ref into dir, which must be empty or absent;
// maxBytes is RestoreOptions.MaxBytes. It implements sandbox.SnapshotStore.
func (s *Store) Restore(ctx context.Context, ref, dir string, maxBytes int64) error {
	return s.RestoreWithOptions(ctx, ref, dir, RestoreOptions{MaxBytes: maxBytes})
}

// RestoreWithOptions writes snapshot ref into dir, which must be an empty
// directory or absent. The tree is built in a private directory beside
// dir, each object checked against its sha256 and size, and moved into
// place only when all of it verified: a corrupted snapshot leaves dir as
// it was. Modes (without setuid and setgid), symlinks, empty directories
// and modification times are restored; ownership is the caller's.
func (s *Store) RestoreWithOptions(ctx context.Context, ref, dir string, opts RestoreOptions) error {
	op := fmt.Sprintf("snapshot: restore %s into %s", ref, dir)
	unlock, err := s.lock(ctx, false)
	if err != nil {
		return sandbox.Wrap(op, nil, err)
	}
	defer unlock()
	id, m, err := s.load(ref)
	if err != nil {
		return err
	}
	op = fmt.Sprintf("snapshot: restore %s into %s", short(id), dir)
	if err := checkBound("its files", m.Total.Bytes, opts.MaxBytes); err != nil {
		return sandbox.Wrap(op, sandbox.ErrInvalid, err)
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return sandbox.Wrap(op, sandbox.ErrInvalid, err)
	}
	exists, err := checkRestoreTarget(dir)
	if err != nil {
		return sandbox.Wrap(op, sandbox.ErrInvalid, err)
	}
	// The staging must be on dir's file system for the moves into place:
	// beside dir, unless dir is a mount point (a tmpfs workspace), then
	// inside it.
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return sandbox.Wrap(op, nil, err)
	}
	stageIn := parent
	if exists && mountPoint(dir) {
		stageIn = dir
	}
	removeStaleRestores(stageIn)
	stage, err := os.MkdirTemp(stageIn, restorePrefix+"*")
	if err != nil {
		return sandbox.Wrap(op, nil, fmt.Errorf("create the staging directory: %w", err))
	}
	// Held while this restore runs, so a concurrent removeStaleRestores
	// leaves the staging alone.
	lockf, err := lockDir(stage)
	if err != nil {
		removeAllForce(stage)
		return sandbox.Wrap(op, nil, err)
	}
	defer lockf.Close()
	placed := false
	defer func() {
		if !placed {
			removeAllForce(stage)
		}
	}()
	if err := s.build(ctx, m, stage, opts.Progress); err != nil {
		return failure(id, op, err)
	}
	if err := place(stage, dir, exists, m.Entries[0]); err != nil {
		return sandbox.Wrap(op, nil, err)
	}
	placed = true
	return nil
}

// restorePrefix names the staging directories of restores.
const restorePrefix = ".agentbox-restore-"

// removeStaleRestores removes staging directories beside a target that a
// killed restore left behind (nobody holds their lock).
func removeStaleRestores(parent string) {
	ents, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), restorePrefix) {
			continue
		}
		p := filepath.Join(parent, e.Name())
		if f, err := lockDir(p); err == nil {
			removeAllForce(p)
			f.Close()
		}
	}
}

// mountPoint says whether dir is on another file system than its parent.
func mountPoint(dir string) bool {
	var st, pst unix.Stat_t
	if unix.Lstat(dir, &st) != nil || unix.Lstat(filepath.Dir(dir), &pst) != nil {
		return false
	}
	return st.Dev != pst.Dev
}

// lockDir takes a non-blocking exclusive flock on a directory.
func lockDir(p string) (*os.File, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", p, err)
	}
	return f, nil
}

// checkRestoreTarget accepts an absent path or an empty directory (not a
// symlink to one) and reports whether it exists.
func checkRestoreTarget(dir string) (bool, error) {
	fi, err := os.Lstat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !fi.IsDir() {
		return false, fmt.Errorf("%s exists and is not a directory", dir)
	}
	f, err := os.Open(dir)
	if err != nil {
		return false, err
	}
	defer f.Close()
	names, _ := f.Readdirnames(-1)
	names = slices.DeleteFunc(names, func(n string) bool { return strings.HasPrefix(n, restorePrefix) })
	if len(names) > 0 {
		return false, fmt.Errorf("%s is not empty (restore needs an empty or absent directory)", dir)
	}
	return true, nil
}

// build materializes m under stage, a directory only this process uses.
// Directories are created first (owner-writable), then files in parallel,
// verified while written, then symlinks, then modes and times, deepest
// directories last so that writing into them does not change their times.
func (s *Store) build(ctx context.Context, m *Manifest, stage string, progress func(int64, int64)) error {
	var files []int
	for i, e := range m.Entries[1:] {
		switch e.Type {
		case TypeDir:
			if err := os.Mkdir(filepath.Join(stage, e.Path), 0o700); err != nil {
				return err
			}
		case TypeFile:
			files = append(files, i+1)
		}
	}
	prog := newProgress(progress, m.Total.Bytes)
	err := forEach(ctx, len(files), func(w *worker, k int) error {
		e := m.Entries[files[k]]
		if err := s.restoreFile(w, e, filepath.Join(stage, e.Path)); err != nil {
			return fmt.Errorf("restore %s: %w", e.Path, err)
		}
		prog.add(e.Size)
		return nil
	})
	if err != nil {
		return err
	}
	prog.finish()
	for _, e := range m.Entries {
		if e.Type == TypeSymlink {
			if err := os.Symlink(e.Target, filepath.Join(stage, e.Path)); err != nil {
				return err
			}
		}
	}
	for i := len(m.Entries) - 1; i >= 0; i-- {
		e := m.Entries[i]
		p := filepath.Join(stage, e.Path)
		if e.Type == TypeDir {
			if err := os.Chmod(p, restoreMode(e)); err != nil {
				return err
			}
		}
		if e.Type == TypeSymlink || e.Type == TypeDir && i > 0 { // files have theirs; the root's is set in place
			if err := setMTime(p, e); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *Store) restoreFile(w *worker, e Entry, p string) error {
	mode := restoreMode(e)
	f, err := openRaw(p, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW, uint32(mode.Perm()))
	if err != nil {
		return err
	}
	switch {
	case len(e.Holes) > 0:
		// Only the data is written; the holes stay unallocated, the last
		// one made by the truncation to the file's size.
		err = s.readObject(w, e.SHA256, e.Size, &holeWriter{f: f, cur: holeCursor{holes: e.Holes}})
		if err == nil {
			if err = unix.Ftruncate(f.fd, e.Size); err != nil {
				err = fmt.Errorf("extend %s to %d bytes: %w", e.Path, e.Size, err)
			}
		}
	case e.Size > 0:
		err = s.readObject(w, e.SHA256, e.Size, f)
	}
	if err == nil && (mode&fs.ModeSticky != 0 || uint32(mode.Perm())&processUmask() != 0) {
		err = unix.Fchmod(f.fd, syscallMode(mode)) // the umask took bits away at creation
	}
	if err == nil {
		err = futimens(f, e)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// futimens sets an open file's times (utimensat with a NULL path), which
// saves a path lookup per restored file.
func futimens(f *rawFile, e Entry) error {
	ts := [2]unix.Timespec{unix.NsecToTimespec(e.MTime.UnixNano()), unix.NsecToTimespec(e.MTime.UnixNano())}
	_, _, errno := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(f.fd), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
	if errno != 0 {
		return fmt.Errorf("set times of %s: %w", e.Path, errno)
	}
	return nil
}

var (
	umaskOnce sync.Once
	umask     uint32 = 0o777
)

// processUmask reads the umask from /proc (umask(2) can only be read by
// changing it, which races with other goroutines creating files). When it
// cannot be read, 0777 makes every restore chmod explicitly.
func processUmask() uint32 {
	umaskOnce.Do(func() {
		data, err := os.ReadFile("/proc/self/status")
		if err != nil {
			return
		}
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "Umask:"); ok {
				if n, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32); err == nil {
					umask = uint32(n)
				}
			}
		}
	})
	return umask
}

func setMTime(p string, e Entry) error {
	ts := unix.NsecToTimespec(e.MTime.UnixNano())
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("set times of %s: %w", e.Path, err)
	}
	return nil
}

// place moves the verified tree at stage to dir. An empty existing dir is
// replaced by rename(2) in one step; when that cannot work (dir is a mount
// point, the staging is inside it) the top-level entries are moved into
// it one by one, which is safe because the content already verified.
func place(stage, dir string, exists bool, root Entry) error {
	// unix.Rename, not os.Rename: os.Rename refuses an existing directory
	// as the destination, rename(2) replaces it when it is empty.
	if filepath.Dir(stage) != dir {
		err := unix.Rename(stage, dir)
		if err == nil {
			return setMTime(dir, root)
		}
		if !exists || !(errors.Is(err, syscall.EBUSY) || errors.Is(err, syscall.EXDEV) || errors.Is(err, syscall.EPERM)) {
			return fmt.Errorf("move restored tree into place: %w", err)
		}
	}
	f, err := os.Open(stage)
	if err != nil {
		return err
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := os.Rename(filepath.Join(stage, n), filepath.Join(dir, n)); err != nil {
			return fmt.Errorf("move restored %s into place: %w", n, err)
		}
	}
	if err := os.Remove(stage); err != nil {
		return err
	}
	if err := os.Chmod(dir, restoreMode(root)); err != nil {
		return err
	}
	return setMTime(dir, root)
}

// removeAllForce removes a staging tree even where restored directory
// modes would forbid it, by making directories owner-writable first.
func removeAllForce(p string) {
	if os.RemoveAll(p) == nil {
		return
	}
	_ = filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(q, 0o700)
		}
		return nil
	})
	_ = os.RemoveAll(p)
}

// syscallMode turns an fs.FileMode into chmod(2) bits.
func syscallMode(m fs.FileMode) uint32 {
	b := uint32(m.Perm())
	if m&fs.ModeSticky != 0 {
		b |= unix.S_ISVTX
	}
	return b
}
