package manifest

import (
	"os/exec"

	"github.com/agentbox/agentbox/internal/beneath"
	"github.com/agentbox/agentbox/sandbox"
	"golang.org/x/sys/unix"
)

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
