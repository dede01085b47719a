package wsfs

import (
	"io/fs"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/sandbox"
)

// fileMode converts a stat mode to an fs.FileMode.
func fileMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & unix.S_IFMT {
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	case unix.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		mode |= fs.ModeSocket
	case unix.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		mode |= fs.ModeDevice
	}
	if m&unix.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if m&unix.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if m&unix.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}

// infoAt describes name in dirfd without following a final symlink; a
// symlink's target is read from the link.
func infoAt(dirfd int, name, display string) (sandbox.FileInfo, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW|unix.AT_EMPTY_PATH); err != nil {
		return sandbox.FileInfo{}, err
	}
	fi := statInfo(display, &st)
	if fi.Mode&fs.ModeSymlink != 0 {
		t, err := readlinkAt(dirfd, name)
		if err != nil {
			return sandbox.FileInfo{}, err
		}
		fi.Target = t
	}
	return fi, nil
}

func statInfo(name string, st *unix.Stat_t) sandbox.FileInfo {
	mode := fileMode(st.Mode)
	return sandbox.FileInfo{
		Name:    name,
		Size:    st.Size,
		Mode:    mode,
		ModTime: time.Unix(st.Mtim.Sec, st.Mtim.Nsec),
		IsDir:   mode.IsDir(),
	}
}
