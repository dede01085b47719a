package beneath

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/testenv"
)

// ChownTree gives a tree to a user (a git clone to the sandbox user):
// every entry, links themselves and not what they point at.
func TestChownTreeGivesEveryEntryAndNoLinkTarget(t *testing.T) {
	testenv.NeedRoot(t, "giving files to another user")
	outside := filepath.Join(t.TempDir(), "host-file")
	must(t, os.WriteFile(outside, nil, 0o644))
	tree := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(tree, "d/e"), 0o755))
	must(t, os.WriteFile(filepath.Join(tree, "d/e/f"), nil, 0o644))
	must(t, os.Symlink(outside, filepath.Join(tree, "d/link")))
	fd, err := unix.Open(tree, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	must(t, err)
	defer unix.Close(fd)
	must(t, ChownTree(fd, Owner{UID: 4321, GID: 4322}, "tree"))
	for _, p := range []string{".", "d", "d/e", "d/e/f", "d/link"} {
		fi, err := os.Lstat(filepath.Join(tree, p))
		must(t, err)
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != 4321 || st.Gid != 4322 {
			t.Errorf("%s owned by %d:%d, want 4321:4322", p, st.Uid, st.Gid)
		}
	}
	fi, err := os.Lstat(outside)
	must(t, err)
	if st := fi.Sys().(*syscall.Stat_t); st.Uid == 4321 {
		t.Error("the link's target outside the tree was given away")
	}
}
