package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/agentbox/agentbox/sandbox"
)

// identity is who commands run as; set is false for "the agentbox user".
type identity struct {
	uid, gid int
	set      bool
}

// parseUser reads Spec.User ("uid[:gid]"). Empty means the agentbox user
// itself: the local backend does not switch identity unless asked, and can
// only switch when agentbox runs as root.
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
		// Without root the only identity available is our own.
		if !hasGid {
			gid = os.Getegid()
		}
		if uid != euid || gid != os.Getegid() {
			return identity{}, &sandbox.Error{Op: "local: create", Kind: sandbox.ErrPolicyUnsupported,
				Err: fmt.Errorf("cannot run commands as user %s: agentbox runs as %d:%d, which cannot switch users", u, euid, os.Getegid())}
		}
		return identity{uid: -1, gid: -1}, nil
	}
	return identity{uid: uid, gid: gid, set: true}, nil
}

// prepareWorkspace returns the host workspace directory for spec and
// whether the session owns it (created it, and removes it on Close). A
// spec.Snapshot is restored into it.
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
		if who.set {
			if err := os.Chown(ws, who.uid, who.gid); err != nil {
				os.RemoveAll(ws)
				return "", false, sandbox.Wrap("local: chown workspace "+ws, nil, err)
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
		if err := c.opts.Snapshots.Restore(ctx, spec.Snapshot, ws); err != nil {
			if owns {
				os.RemoveAll(ws)
			}
			return "", false, sandbox.Wrap("local: restore snapshot "+spec.Snapshot+" into "+ws, nil, err)
		}
	}
	return ws, owns, nil
}
