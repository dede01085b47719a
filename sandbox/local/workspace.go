package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/agentbox/agentbox/internal/owned"
	"github.com/agentbox/agentbox/sandbox"
)

// identity is who commands run as; set is false for "the agentbox user".
type identity struct {
	uid, gid int
	set      bool
	gidSet   bool // Spec.User named the gid
}

// parseUser reads Spec.User ("uid[:gid]"). Empty means no request: the
// session then runs as the workspace's owner (see sessionUser). Without
// root the only identity available is the agentbox user's own.
func parseUser(u string) (identity, error) {
	if u == "" {
		return identity{uid: -1, gid: -1}, nil
	}
	us, gs, hasGid := strings.Cut(u, ":")
	uid, err := strconv.Atoi(us)
	if err != nil || uid < 0 {
		return identity{}, sandbox.Errorf(sandbox.ErrInvalid, "local: user %q: want uid[:gid] (numbers)", u)
	}
	gid := uid
	if hasGid {
		if gid, err = strconv.Atoi(gs); err != nil || gid < 0 {
			return identity{}, sandbox.Errorf(sandbox.ErrInvalid, "local: user %q: want uid[:gid] (numbers)", u)
		}
	}
	if euid := os.Geteuid(); euid != 0 {
		if !hasGid {
			gid = os.Getegid()
		}
		if uid != euid || gid != os.Getegid() {
			return identity{}, &sandbox.Error{Op: "local: create", Kind: sandbox.ErrPolicyUnsupported,
				Err: fmt.Errorf("cannot run commands as user %s: agentbox runs as %d:%d, which cannot switch users", u, euid, os.Getegid())}
		}
		return identity{uid: -1, gid: -1}, nil
	}
	return identity{uid: uid, gid: gid, set: true, gidSet: hasGid}, nil
}

// sessionUser is who commands in the workspace ws run as, by the rule
// every backend keeps: what they create belongs on the host to the
// directory's owner, so they run as that owner. As root: Spec.User, which
// must be the owner (and the owner's group, when it names one), or else
// the owner. Otherwise: the agentbox user, who must own the directory (a
// local session cannot switch users). Anything else is refused naming
// the directory, its owner and mode.
func sessionUser(u string, ws *owned.Path) (identity, error) {
	want, err := parseUser(u)
	if err != nil {
		return identity{}, err
	}
	o := ws.Owner
	if os.Geteuid() != 0 {
		if o.UID != os.Geteuid() {
			return identity{}, &sandbox.Error{Op: "local: create", Kind: sandbox.ErrPolicyUnsupported,
				Err: fmt.Errorf("workspace %s belongs to another user, and the local backend runs commands as you (%d:%d) without root, so what they created there would not be its owner's: run agentbox as %d, or use a directory you own", ws, os.Geteuid(), os.Getegid(), o.UID)}
		}
		return want, nil
	}
	if want.set && (want.uid != o.UID || want.gidSet && want.gid != o.GID) {
		return identity{}, &sandbox.Error{Op: "local: create", Kind: sandbox.ErrPolicyUnsupported,
			Err: fmt.Errorf("cannot run as user %s in workspace %s: the local backend runs commands as the workspace's owner, so that what they create is the owner's; leave the user unset to run as %d:%d, or use a directory that %s owns", u, ws, o.UID, o.GID, u)}
	}
	if o.UID == os.Geteuid() && o.GID == os.Getegid() {
		return identity{uid: -1, gid: -1}, nil // ourselves: nothing to switch
	}
	return identity{uid: o.UID, gid: o.GID, set: true}, nil
}

// owner is who a directory the session makes should belong to: the
// requested user, or (nil) the process itself or what the directory
// replaces.
func (id identity) owner() *owned.Owner {
	if !id.set {
		return nil
	}
	return &owned.Owner{UID: id.uid, GID: id.gid}
}

// prepareWorkspace returns the host workspace directory for spec and
// whether the session owns it (created it, and removes it on Close). A
// spec.Snapshot is restored into it, owned by the requested user or, if
// none, by the owner of the directory it fills (owned.Restore).
func (c *Client) prepareWorkspace(ctx context.Context, spec sandbox.Spec, id string) (string, bool, error) {
	who, err := parseUser(spec.User)
	if err != nil {
		return "", false, err
	}
	if spec.Snapshot != "" && c.opts.Snapshots == nil {
		return "", false, sandbox.Errorf(sandbox.ErrInvalid, "local: create: spec asks for snapshot %q but no snapshot store is configured", spec.Snapshot)
	}
	ws, owns := spec.Workspace, false
	if ws == "" {
		ws, err = os.MkdirTemp("", "agentbox-"+id+"-")
		if err != nil {
			return "", false, sandbox.Wrap("local: create workspace", nil, err)
		}
		owns = true
		if o := who.owner(); o != nil {
			// MkdirTemp made it 0700 and ours, in a sticky directory: no
			// one else can reach it before it is given away.
			p, err := owned.Open(ws)
			if err == nil {
				err = p.Chown(*o)
				p.Close()
			}
			if err != nil {
				os.RemoveAll(ws)
				return "", false, sandbox.Wrap("local: create workspace", nil, err)
			}
		}
	} else {
		if ws, err = filepath.Abs(ws); err != nil {
			return "", false, sandbox.Wrap("local: workspace "+spec.Workspace, sandbox.ErrInvalid, err)
		}
		fi, err := os.Stat(ws)
		switch {
		case err != nil && os.IsNotExist(err) && spec.Snapshot != "":
			// Restore creates it.
		case err != nil && os.IsNotExist(err):
			return "", false, sandbox.Wrap("local: workspace "+ws, sandbox.ErrNotFound, err)
		case err != nil:
			return "", false, sandbox.Wrap("local: workspace "+ws, nil, err)
		case !fi.IsDir():
			return "", false, sandbox.Errorf(sandbox.ErrInvalid, "local: workspace %s is not a directory", ws)
		}
	}
	if spec.Snapshot != "" {
		p, err := owned.Restore(ctx, c.opts.Snapshots, spec.Snapshot, ws, who.owner(), spec.Policy.Resources.DiskBytes)
		if err != nil {
			if owns {
				os.RemoveAll(ws)
			}
			return "", false, sandbox.Wrap("local: restore snapshot "+spec.Snapshot+" into "+ws, nil, err)
		}
		p.Close()
	}
	return ws, owns, nil
}
