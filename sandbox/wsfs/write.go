package wsfs

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/sandbox"
)

// WriteFile replaces rel atomically with data: a temporary file in the
// same directory is written, fsynced, given mode (permission bits only;
// 0 means 0644) and, when uid or gid is >= 0, that owner, then renamed over
// rel. Missing parent directories are created (0755, owned by uid/gid). A
// symlink or directory at rel is refused: the write never goes through a
// link, and a link swapped in after the check is replaced, not followed.
func (r *Root) WriteFile(rel string, data []byte, mode fs.FileMode, uid, gid int) error {
	const op = "wsfs: write"
	clean, err := cleanRel(rel)
	if err != nil {
		return mapErr(op, rel, err)
	}
	rel = clean
	if rel == "." {
		return sandbox.Wrap(op+" "+rel, sandbox.ErrInvalid, fmt.Errorf("cannot write the root directory as a file"))
	}
	root, release, err := r.hold("write")
	if err != nil {
		return err
	}
	defer release()
	dir, base := path.Split(rel)
	dirfd, err := r.mkdirAll(root, path.Clean("./"+dir), 0o755, uid, gid)
	if err != nil {
		return mapErr(op, rel, err)
	}
	defer unix.Close(dirfd)

	var st unix.Stat_t
	switch err := unix.Fstatat(dirfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); {
	case err == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return sandbox.Wrap(op+" "+rel, sandbox.ErrPathEscape, fmt.Errorf("refusing to write through a symlink"))
	case err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR:
		return sandbox.Wrap(op+" "+rel, sandbox.ErrInvalid, fmt.Errorf("is a directory"))
	case err != nil && err != unix.ENOENT:
		return mapErr(op, rel, fmt.Errorf("stat: %w", err))
	}

	perm := uint32(mode.Perm())
	if perm == 0 {
		perm = 0o644
	}
	tmp, fd, err := createTemp(dirfd, base)
	if err != nil {
		return mapErr(op, rel, fmt.Errorf("create temporary file: %w", err))
	}
	committed := false
	defer func() {
		if !committed {
			unix.Unlinkat(dirfd, tmp, 0)
		}
	}()
	werr := writeAll(fd, data)
	if werr == nil {
		// Fchmod after creation: the umask must not narrow the mode.
		werr = wrapStep("chmod", unix.Fchmod(fd, perm))
	}
	if werr == nil && (uid >= 0 || gid >= 0) {
		werr = wrapStep("chown", unix.Fchown(fd, uid, gid))
	}
	if werr == nil {
		werr = wrapStep("fsync", unix.Fsync(fd))
	}
	if cerr := unix.Close(fd); werr == nil {
		werr = wrapStep("close", cerr)
	}
	if werr != nil {
		return mapErr(op, rel, werr)
	}
	if err := unix.Renameat(dirfd, tmp, dirfd, base); err != nil {
		return mapErr(op, rel, fmt.Errorf("rename into place: %w", err))
	}
	committed = true
	syncDir(dirfd)
	return nil
}

// MkdirAll creates rel and any missing parents with mode (0 means 0755),
// owned by uid/gid when they are >= 0. Existing directories are kept as
// they are; symlinks along the way are followed inside the root.
func (r *Root) MkdirAll(rel string, mode fs.FileMode, uid, gid int) error {
	const op = "wsfs: mkdir"
	clean, err := cleanRel(rel)
	if err != nil {
		return mapErr(op, rel, err)
	}
	rel = clean
	root, release, err := r.hold("mkdir")
	if err != nil {
		return err
	}
	defer release()
	perm := uint32(mode.Perm())
	if perm == 0 {
		perm = 0o755
	}
	fd, err := r.mkdirAll(root, rel, perm, uid, gid)
	if err != nil {
		return mapErr(op, rel, err)
	}
	unix.Close(fd)
	return nil
}

// mkdirAll makes rel a directory and returns it opened O_PATH.
func (r *Root) mkdirAll(root int, rel string, perm uint32, uid, gid int) (int, error) {
	cur, err := unix.Openat(root, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	prefix := "."
	for _, c := range strings.Split(rel, "/") {
		prefix = path.Join(prefix, c)
		next, err := r.openIn(root, prefix, unix.O_PATH|unix.O_DIRECTORY)
		if err == unix.ENOENT {
			// Create the component in the directory the previous prefix
			// resolved to (inside the root), then resolve it again.
			merr := unix.Mkdirat(cur, c, perm)
			if merr == nil && (uid >= 0 || gid >= 0) {
				merr = unix.Fchownat(cur, c, uid, gid, unix.AT_SYMLINK_NOFOLLOW)
				if merr != nil {
					merr = fmt.Errorf("chown %s: %w", prefix, merr)
				}
			}
			if merr != nil && merr != unix.EEXIST {
				unix.Close(cur)
				return -1, fmt.Errorf("mkdir %s: %w", prefix, merr)
			}
			next, err = r.openIn(root, prefix, unix.O_PATH|unix.O_DIRECTORY)
		}
		unix.Close(cur)
		if err != nil {
			return -1, fmt.Errorf("open directory %s: %w", prefix, err)
		}
		cur = next
	}
	return cur, nil
}

// Remove removes the file, symlink (not its target) or empty directory rel.
func (r *Root) Remove(rel string) error {
	const op = "wsfs: remove"
	clean, err := cleanRel(rel)
	if err != nil {
		return mapErr(op, rel, err)
	}
	rel = clean
	root, release, err := r.hold("remove")
	if err != nil {
		return err
	}
	defer release()
	dirfd, base, err := r.openParent(root, rel)
	if err != nil {
		return mapErr(op, rel, err)
	}
	defer unix.Close(dirfd)
	err = unix.Unlinkat(dirfd, base, 0)
	if err == unix.EISDIR {
		err = unix.Unlinkat(dirfd, base, unix.AT_REMOVEDIR)
	}
	if err != nil {
		return mapErr(op, rel, fmt.Errorf("unlink %s: %w", rel, err))
	}
	return nil
}

// createTemp makes an exclusive temporary file beside base in dirfd.
func createTemp(dirfd int, base string) (string, int, error) {
	for range 16 {
		var b [8]byte
		_, _ = rand.Read(b[:])
		name := ".agentbox-" + hex.EncodeToString(b[:]) + ".tmp"
		if len(base) < 200 {
			name = "." + base + name
		}
		fd, err := unix.Openat(dirfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err == unix.EEXIST {
			continue
		}
		return name, fd, err
	}
	return "", -1, unix.EEXIST
}

func writeAll(fd int, data []byte) error {
	for len(data) > 0 {
		n, err := unix.Write(fd, data)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("write: %w", err)
		}
		data = data[n:]
	}
	return nil
}

func wrapStep(step string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", step, err)
}

// syncDir makes the rename durable; best effort (an O_PATH descriptor
// cannot be fsynced, so the directory is reopened for reading).
func syncDir(dirfd int) {
	fd, err := unix.Openat(dirfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	_ = unix.Fsync(fd)
	unix.Close(fd)
}
