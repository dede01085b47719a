// Package owned holds a session's host directory (its workspace, a mount
// source) by a descriptor with its owner read from that descriptor, and
// makes or restores one owned by a given user. It serves the backends
// that run commands as a plain host uid, with no id mapping (docker,
// local): what a command creates belongs to the uid it runs as, so that
// uid must be the directory's owner, as read from the directory itself
// and not from a path someone could swap in the meantime. Nothing here
// changes the owner of anything that existed before it was called.
package owned

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/beneath"
	"github.com/agentbox/agentbox/internal/fsmode"
)

// Owner is a uid and gid.
type Owner = beneath.Owner

// Path is a host file or directory held open, with what fstat(2) said of
// it through that descriptor.
type Path struct {
	// Name is the absolute path it was opened by.
	Name string
	// Owner is its owner.
	Owner Owner
	// Mode is its type and permission bits.
	Mode fs.FileMode
	// ID is its device and inode, to recognise it again (a bind mount
	// of it, say).
	ID beneath.Identity
	fd int
}

// Open opens the existing path name, following links on the way as the
// caller named it, and reads its owner from the descriptor it holds.
func Open(name string) (*Path, error) {
	abs, err := filepath.Abs(name)
	if err != nil {
		return nil, err
	}
	fd, err := unix.Open(abs, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: abs, Err: err}
	}
	return FromFd(abs, fd)
}

// FromFd makes a Path of the descriptor fd, opened by the absolute path
// name (it takes fd over, and closes it on error).
func FromFd(name string, fd int) (*Path, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &fs.PathError{Op: "stat", Path: name, Err: err}
	}
	return &Path{
		Name:  name,
		Owner: Owner{UID: int(st.Uid), GID: int(st.Gid)},
		Mode:  fsmode.FromStat(st.Mode),
		ID:    beneath.Identity{Dev: st.Dev, Ino: st.Ino},
		fd:    fd,
	}, nil
}

// Fd is the O_PATH descriptor p holds.
func (p *Path) Fd() int { return p.fd }

// Close releases the descriptor; it is safe on nil and twice.
func (p *Path) Close() error {
	if p == nil || p.fd < 0 {
		return nil
	}
	err := unix.Close(p.fd)
	p.fd = -1
	return err
}

// String names p with its owner and mode, for messages that must say why
// a directory cannot be used: "/src/app (owner 4242:4242, mode 0755)".
func (p *Path) String() string {
	return fmt.Sprintf("%s (owner %d:%d, mode %04o)", p.Name, p.Owner.UID, p.Owner.GID, p.Mode.Perm())
}

// Chown gives p to o through its descriptor. Use it only on what no one
// else can reach yet, such as a directory just made in a private place:
// the owner of anything else is not agentbox's to change.
func (p *Path) Chown(o Owner) error {
	if p.Owner == o {
		return nil
	}
	if err := unix.Fchownat(p.fd, "", o.UID, o.GID, unix.AT_EMPTY_PATH); err != nil {
		return fmt.Errorf("give %s to %d:%d: %w", p.Name, o.UID, o.GID, err)
	}
	p.Owner = o
	return nil
}

// Same reports whether p and o are one file.
func (p *Path) Same(o *Path) bool { return p.ID == o.ID }

// Make opens the directory name, making it when it is missing: the
// directories on the way owned like the directory each is made in, name
// itself with perm and owned by owner (nil: likewise). What exists is
// opened as Open does and left as it is. made says whether name was made.
func Make(name string, perm fs.FileMode, owner *Owner) (_ *Path, made bool, err error) {
	abs, err := filepath.Abs(name)
	if err != nil {
		return nil, false, err
	}
	if p, err := Open(abs); !errors.Is(err, fs.ErrNotExist) {
		if err == nil && !p.Mode.IsDir() {
			p.Close()
			return nil, false, fmt.Errorf("%s is a %s, not a directory", abs, fsmode.Describe(p.Mode))
		}
		return p, false, err
	}
	anc, rel := abs, ""
	for {
		parent := filepath.Dir(anc)
		if rel == "" {
			rel = filepath.Base(anc)
		} else {
			rel = filepath.Join(filepath.Base(anc), rel)
		}
		anc = parent
		if _, err := os.Stat(anc); err == nil || anc == "/" {
			break
		}
	}
	top, err := unix.Open(anc, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, false, &fs.PathError{Op: "open", Path: anc, Err: err}
	}
	defer unix.Close(top)
	parent, last, err := beneath.OpenParent(top, rel, beneath.Options{Make: beneath.MakeMissing})
	if err != nil {
		return nil, false, fmt.Errorf("make %s: %w", abs, err)
	}
	defer unix.Close(parent)
	fd, err := beneath.Open(parent, last, beneath.Options{Flags: unix.O_PATH, Kind: beneath.Dir, Make: beneath.MakeMissing,
		Perm: perm, Owner: owner, Made: func(string) { made = true }})
	if err != nil {
		return nil, false, fmt.Errorf("make %s: %w", abs, err)
	}
	p, err := FromFd(abs, fd)
	return p, made, err
}

// stagePrefix names the private directories Restore builds a tree in.
const stagePrefix = ".agentbox-seed-"

func stageName() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return stagePrefix + hex.EncodeToString(b[:])
}
