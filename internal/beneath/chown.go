package beneath

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/atfile"
)

// ChownTree gives the directory fd and every entry under it to o (an id
// of -1 is left as it is), by descriptor: each directory is entered from
// its parent's descriptor without following a link, and a link is given
// away itself, never what it points at. display names fd in errors.
//
// Threat: a tree someone else can change while it is walked (the race of
// issue 15: a directory swapped for a link to /etc between a path walk's
// listing and its lchown). Walking by descriptor keeps the walk inside the
// tree; it does not stop someone who can write in the tree from moving
// their own files into it meanwhile, so give only trees no one else can
// reach yet (a fresh clone, a restore in a private directory).
func ChownTree(fd int, o Owner, display string) error {
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
			if err := unix.Fchownat(fd, n, o.UID, o.GID, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				return fmt.Errorf("chown %s: %w", show, err)
			}
			continue
		}
		sub, err := Open(fd, n, Options{Flags: unix.O_PATH, Kind: Dir})
		if err != nil {
			return fmt.Errorf("chown %s: %w", show, err)
		}
		err = ChownTree(sub, o, show)
		unix.Close(sub)
		if err != nil {
			return err
		}
	}
	return nil
}
