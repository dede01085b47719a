package wsfs

import (
	"io/fs"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/atfile"
	"github.com/agentbox/agentbox/internal/fsmode"
	"github.com/agentbox/agentbox/sandbox"
)

// infoAt describes name in dirfd without following a final symlink; a
// symlink's target is read from the link.
func infoAt(dirfd int, name, display string) (sandbox.FileInfo, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW|unix.AT_EMPTY_PATH); err != nil {
		return sandbox.FileInfo{}, err
	}
	fi := statInfo(display, &st)
	if fi.Mode&fs.ModeSymlink != 0 {
		t, err := atfile.Readlink(dirfd, name)
		if err != nil {
			return sandbox.FileInfo{}, err
		}
		fi.Target = t
	}
	return fi, nil
}

func statInfo(name string, st *unix.Stat_t) sandbox.FileInfo {
	mode := fsmode.FromStat(st.Mode)
	return sandbox.FileInfo{
		Name:    name,
		Size:    st.Size,
		Mode:    mode,
		ModTime: time.Unix(st.Mtim.Sec, st.Mtim.Nsec),
		IsDir:   mode.IsDir(),
	}
}
