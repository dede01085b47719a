package owned

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/atfile"
	"github.com/agentbox/agentbox/internal/beneath"
)

// Restorer is the part of a snapshot store Restore uses
// (sandbox.SnapshotStore has it).
type Restorer interface {
	Restore(ctx context.Context, ref, dir string, maxBytes int64) error
}

// ErrNotEmpty is what Restore says of a directory that already holds
// something.
var ErrNotEmpty = errors.New("not empty: a snapshot is restored only into an empty or missing directory")

// Restore writes snapshot ref from store into the directory name, which
// must be empty or missing, with every restored entry owned by owner
// (nil: the owner of name, or when it is missing, of the directory it is
// made in), and returns it held open. The directories on the way to name
// are made as Make makes them. An empty name is replaced by the restored
// directory, which has the snapshot's mode. maxBytes is the store's
// (sandbox.SnapshotStore.Restore): the disk limit of the session seeded.
//
// A store restores as this process, so as root every file would be
// root's; the tree is given away with beneath.ChownTree before anyone
// else can reach it. What stops the race is where it is built: in a
// directory made here, beside name, mode 0700 and owned by this process
// (checked through the descriptor it is reached by, so a directory
// someone put in its place is refused), which no other uid can enter.
// Only a process of this same uid could, that is a root session of a
// backend without id mapping whose mount shows the parent of name; it
// could move its own files in, but not a link out of the tree (the
// walk is by descriptor) nor a file of another mount (link and rename
// across mounts fail with EXDEV), so nothing it could not already
// change changes owner. The finished tree is renamed onto name in one
// step, from the held descriptors of both directories.
func Restore(ctx context.Context, store Restorer, ref, name string, owner *Owner, maxBytes int64) (*Path, error) {
	abs, err := filepath.Abs(name)
	if err != nil {
		return nil, err
	}
	if abs == "/" {
		return nil, fmt.Errorf("restore %s into /: refusing", ref)
	}
	parent, _, err := Make(filepath.Dir(abs), 0o755, nil)
	if err != nil {
		return nil, err
	}
	defer parent.Close()
	base := filepath.Base(abs)
	if owner == nil {
		o := parent.Owner
		if cur, err := existing(parent.fd, base, abs); err != nil {
			return nil, err
		} else if cur != nil {
			o = *cur
		}
		owner = &o
	}
	self := Owner{UID: os.Geteuid(), GID: os.Getegid()}
	if *owner != self && self.UID != 0 {
		return nil, fmt.Errorf("restore %s into %s for %d:%d: only root can give files to another user (this process is %d:%d)", ref, abs, owner.UID, owner.GID, self.UID, self.GID)
	}

	stage := stageName()
	if err := unix.Mkdirat(parent.fd, stage, 0o700); err != nil {
		return nil, fmt.Errorf("restore %s: make %s: %w", ref, filepath.Join(parent.Name, stage), err)
	}
	sfd, err := unix.Openat(parent.fd, stage, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == nil {
		err = checkPrivate(sfd, self)
		if err != nil {
			unix.Close(sfd)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("restore %s: open the private directory %s: %w", ref, filepath.Join(parent.Name, stage), err)
	}
	defer unix.Close(sfd)
	inStage := fmt.Sprintf("/proc/self/fd/%d/w", sfd)
	placed := false
	defer func() {
		if !placed {
			_ = os.RemoveAll(inStage)
		}
		_ = unix.Unlinkat(parent.fd, stage, unix.AT_REMOVEDIR)
	}()
	if err := store.Restore(ctx, ref, inStage, maxBytes); err != nil {
		return nil, err
	}
	wfd, err := beneath.Open(sfd, "w", beneath.Options{Flags: unix.O_PATH, Kind: beneath.Dir})
	if err != nil {
		return nil, fmt.Errorf("restore %s: open the restored tree: %w", ref, err)
	}
	if *owner != self {
		if err := beneath.ChownTree(wfd, *owner, abs); err != nil {
			unix.Close(wfd)
			return nil, fmt.Errorf("restore %s: give the restored tree to %d:%d: %w", ref, owner.UID, owner.GID, err)
		}
	}
	// rename(2) replaces an empty directory and refuses anything else.
	if err := unix.Renameat(sfd, "w", parent.fd, base); err != nil {
		unix.Close(wfd)
		switch {
		case errors.Is(err, unix.ENOTEMPTY), errors.Is(err, unix.EEXIST), errors.Is(err, unix.ENOTDIR):
			return nil, fmt.Errorf("restore %s into %s: %w", ref, abs, ErrNotEmpty)
		case errors.Is(err, unix.EBUSY):
			return nil, fmt.Errorf("restore %s into %s: it is a mount point, which cannot be replaced; restore into a directory below it", ref, abs)
		}
		return nil, fmt.Errorf("restore %s: move the restored tree to %s: %w", ref, abs, err)
	}
	placed = true
	return FromFd(abs, wfd)
}

// existing is the owner of the directory name in dir, nil when there is
// none; something that is not an empty directory is ErrNotEmpty.
func existing(dir int, name, show string) (*Owner, error) {
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w (%w)", show, ErrNotEmpty, err)
	}
	defer unix.Close(fd)
	names, err := atfile.Names(fd)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", show, err)
	}
	if len(names) > 0 {
		return nil, fmt.Errorf("%s: %w", show, ErrNotEmpty)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	return &Owner{UID: int(st.Uid), GID: int(st.Gid)}, nil
}

// checkPrivate refuses a directory that is not self's with mode 0700:
// not the one just made.
func checkPrivate(fd int, self Owner) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if int(st.Uid) != self.UID || st.Mode&0o7777 != 0o700 {
		return fmt.Errorf("it is owned by %d with mode %04o, not the private directory just made: refusing", st.Uid, st.Mode&0o7777)
	}
	return nil
}
