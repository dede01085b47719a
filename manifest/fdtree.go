package manifest

import (
	"fmt"
	"os/exec"

	"github.com/agentbox/agentbox/internal/atfile"
	"github.com/agentbox/agentbox/internal/beneath"
	"github.com/agentbox/agentbox/sandbox"
	"golang.org/x/sys/unix"
)

// chownTree gives every entry under the directory fd (and fd itself) to
// o, never following links.
func chownTree(fd int, o beneath.Owner, display string) error {
	if o.UID < 0 && o.GID < 0 {
		return nil
	}
	if err := unix.Fchownat(fd, "", o.UID, o.GID, unix.AT_EMPTY_PATH); err != nil {
		return fmt.Errorf("chown %s: %w", display, err)
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
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			if err := chownLink(fd, n, o); err != nil {
				return fmt.Errorf("chown %s: %w", show, err)
			}
			continue
		}
		sub, err := beneath.Open(fd, n, beneath.Options{Flags: unix.O_PATH, Kind: beneath.Dir})
		if err != nil {
			return fmt.Errorf("chown %s: %w", show, err)
		}
		err = chownTree(sub, o, show)
		unix.Close(sub)
		if err != nil {
			return err
		}
	}
	return nil
}

// chownLink gives name in dir to o, never following it if it is a link.
func chownLink(dir int, name string, o beneath.Owner) error {
	if o.UID < 0 && o.GID < 0 {
		return nil
	}
	return unix.Fchownat(dir, name, o.UID, o.GID, unix.AT_SYMLINK_NOFOLLOW)
}

// lookGit finds the git binary, or says clearly that it is missing.
func lookGit() (string, error) {
	p, err := exec.LookPath("git")
	if err != nil {
		return "", sandbox.Errorf(sandbox.ErrUnavailable, "git_repo needs the git binary on the host: %w", err)
	}
	return p, nil
}
