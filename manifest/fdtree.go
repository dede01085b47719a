package manifest

import (
	"fmt"
	"os/exec"

	"github.com/agentbox/agentbox/internal/atfile"
	"github.com/agentbox/agentbox/sandbox"
	"golang.org/x/sys/unix"
)

// chownTree gives every entry under the directory fd (and fd itself) to
// o, never following links.
func chownTree(fd int, o owner, display string) error {
	if o.uid < 0 && o.gid < 0 {
		return nil
	}
	if err := o.apply(fd, display); err != nil {
		return err
	}
	names, err := atfile.Names(fd)
	if err != nil {
		return fmt.Errorf("list %s: %w", display, err)
	}
	for _, n := range names {
		show := display + "/" + n
		var st unix.Stat_t
		if err := unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("stat %s: %w", show, err)
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			sub, err := unix.Openat(fd, n, dirFlags, 0)
			if err != nil {
				return fmt.Errorf("open %s: %w", show, noFollowErr(err))
			}
			err = chownTree(sub, o, show)
			unix.Close(sub)
			if err != nil {
				return err
			}
			continue
		}
		if err := unix.Fchownat(fd, n, o.uid, o.gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("chown %s: %w", show, err)
		}
	}
	return nil
}

// lookGit finds the git binary, or says clearly that it is missing.
func lookGit() (string, error) {
	p, err := exec.LookPath("git")
	if err != nil {
		return "", sandbox.Errorf(sandbox.ErrUnavailable, "git_repo needs the git binary on the host: %w", err)
	}
	return p, nil
}
