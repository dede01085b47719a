package wsfs

import (
	"fmt"
	"io"
	"os"
	"path"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/fsmode"
	"github.com/agentbox/agentbox/sandbox"
)

// ReadFile reads the regular file rel. max > 0 caps its size: a larger
// file is an error wrapping sandbox.ErrOutputLimit and a
// *sandbox.FileSizeError, and nothing is returned. Symlinks are followed inside the root only.
func (r *Root) ReadFile(rel string, max int64) ([]byte, error) {
	const op = "wsfs: read"
	clean, err := cleanRel(rel)
	if err != nil {
		return nil, mapErr(op, rel, err)
	}
	rel = clean
	root, release, err := r.hold("read")
	if err != nil {
		return nil, err
	}
	defer release()
	// O_NONBLOCK: a FIFO planted by the sandbox must not hang the host.
	fd, err := r.openIn(root, rel, unix.O_RDONLY|unix.O_NOCTTY|unix.O_NONBLOCK)
	if err != nil {
		return nil, mapErr(op, rel, fmt.Errorf("open %s: %w", rel, err))
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, mapErr(op, rel, fmt.Errorf("stat: %w", err))
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, sandbox.Wrap(op+" "+rel, sandbox.ErrInvalid, fmt.Errorf("not a regular file (%v)", fsmode.FromStat(st.Mode).Type()))
	}
	if max > 0 && st.Size > max {
		return nil, sandbox.Wrap(op+" "+rel, sandbox.ErrOutputLimit, &sandbox.FileSizeError{Size: st.Size, Limit: max})
	}
	var src io.Reader = f
	if max > 0 {
		// The file may grow while we read; never take more than max+1.
		src = io.LimitReader(f, max+1)
	}
	data, err := io.ReadAll(src)
	if err != nil {
		return nil, mapErr(op, rel, err)
	}
	if max > 0 && int64(len(data)) > max {
		return nil, sandbox.Wrap(op+" "+rel, sandbox.ErrOutputLimit, &sandbox.FileSizeError{Size: -1, Limit: max})
	}
	return data, nil
}

// Stat describes rel itself: a final symlink is not followed but reported
// with its Target. Symlinks in the leading components are followed inside
// the root.
func (r *Root) Stat(rel string) (sandbox.FileInfo, error) {
	const op = "wsfs: stat"
	clean, err := cleanRel(rel)
	if err != nil {
		return sandbox.FileInfo{}, mapErr(op, rel, err)
	}
	rel = clean
	root, release, err := r.hold("stat")
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	defer release()
	if rel == "." {
		fi, err := infoAt(root, "", ".")
		return fi, mapErr(op, rel, err)
	}
	dirfd, base, err := r.openParent(root, rel)
	if err != nil {
		return sandbox.FileInfo{}, mapErr(op, rel, err)
	}
	defer unix.Close(dirfd)
	fi, err := infoAt(dirfd, base, base)
	if err != nil {
		return sandbox.FileInfo{}, mapErr(op, rel, fmt.Errorf("stat %s: %w", rel, err))
	}
	return fi, nil
}

// ListDir lists the directory rel, sorted by name, without following the
// entries' symlinks (their targets are reported).
func (r *Root) ListDir(rel string) ([]sandbox.FileInfo, error) {
	const op = "wsfs: list"
	clean, err := cleanRel(rel)
	if err != nil {
		return nil, mapErr(op, rel, err)
	}
	rel = clean
	root, release, err := r.hold("list")
	if err != nil {
		return nil, err
	}
	defer release()
	fd, err := r.openIn(root, rel, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, mapErr(op, rel, fmt.Errorf("open %s: %w", rel, err))
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, mapErr(op, rel, fmt.Errorf("read directory: %w", err))
	}
	slices.Sort(names)
	out := make([]sandbox.FileInfo, 0, len(names))
	for _, n := range names {
		fi, err := infoAt(fd, n, n)
		if err == unix.ENOENT {
			continue // removed while we listed
		}
		if err != nil {
			return nil, mapErr(op, path.Join(rel, n), err)
		}
		out = append(out, fi)
	}
	return out, nil
}
