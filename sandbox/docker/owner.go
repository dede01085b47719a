package docker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/agentbox/agentbox/internal/owned"
	"github.com/agentbox/agentbox/sandbox"
)

// The ownership rule (issue 15): what a command creates in the workspace
// or a read-write mount belongs on the host to that directory's owner,
// and nothing on the host changes owner, ever.
//
// The native backend gets there with idmapped mounts. The Docker Engine
// API has no per-container id mapping to do it with: no idmapped bind
// mount and no per-container user namespace in any version this client
// speaks (HostConfig.UsernsMode only opts a container out of the
// daemon-wide userns-remap, which maps every container onto one
// subordinate range that owns none of the user's files). So docker runs
// the container's commands as the workspace directory's owner, read from
// a descriptor of the directory (internal/owned), with every capability
// dropped, no-new-privileges and the seccomp profile, as for any user:
//
//   - Spec.User, when set, must be that owner (and its gid, when given,
//     the directory's group); otherwise the spec is refused, naming the
//     directory, its owner and mode, and the way out.
//   - A workspace the backend makes is made owned by the session user:
//     Spec.User, else 1000:1000 for the temporary workspace (the caller's
//     ids when agentbox is not root), else the recorded session user when
//     a Rebuild remakes a directory, else the owner of the directory it is
//     made in (or, for a restore, of the empty directory it replaces). A
//     restored snapshot is built in a private directory and given to that
//     user by descriptor before anything else can reach it (owned.Restore).
//   - A read-write mount must belong to the session user and be writable
//     by its owner; otherwise the spec is refused naming the path, its
//     owner and mode, and the way out (mount it read-only, or give it to
//     the user). A read-only mount is read with the user's permissions.
//   - An engine that remaps ids itself (userns-remap, rootless) is
//     refused: the uid inside is not the host uid there.

// userRequest is Spec.User as parsed: set is false when it is empty.
type userRequest struct {
	id          identity
	set, gidSet bool
}

// parseUser reads Spec.User ("uid[:gid]", numeric).
func parseUser(u string) (userRequest, error) {
	if u == "" {
		return userRequest{}, nil
	}
	us, gs, hasGID := strings.Cut(u, ":")
	uid, err := strconv.Atoi(us)
	if err != nil || uid < 0 {
		return userRequest{}, sandbox.Errorf(sandbox.ErrInvalid, "docker: user %q: uid must be a number", u)
	}
	gid := uid
	if hasGID {
		if gid, err = strconv.Atoi(gs); err != nil || gid < 0 {
			return userRequest{}, sandbox.Errorf(sandbox.ErrInvalid, "docker: user %q: gid must be a number", u)
		}
	}
	return userRequest{id: identity{uid, gid}, set: true, gidSet: hasGID}, nil
}

// parseIdentity reads "uid:gid" as recorded in handles or a container's
// configuration; ok is false for anything else.
func parseIdentity(s string) (identity, bool) {
	r, err := parseUser(s)
	if err != nil || !r.set || !r.gidSet {
		return identity{}, false
	}
	return r.id, true
}

// ownerOf is the owner of p as an identity.
func ownerOf(p *owned.Path) identity { return identity{p.Owner.UID, p.Owner.GID} }

func (id identity) owner() *owned.Owner { return &owned.Owner{UID: id.uid, GID: id.gid} }

// newWorkspaceUser is who owns the temporary workspace the backend makes
// when the spec names no user: the default sandbox user as root, the
// caller otherwise (who cannot give a directory away).
func newWorkspaceUser() identity {
	if os.Geteuid() == 0 {
		return identity{sandbox.DefaultUID, sandbox.DefaultGID}
	}
	return identity{os.Geteuid(), os.Getegid()}
}

// prepareWorkspace settles the host directory bound at the workdir, held
// by a descriptor (s.binds.ws), and who the session runs as (s.who): its
// owner.
// reuse is an existing workspace to bind again (Rebuild); recorded is
// the session user a Rebuild found in the old state, if any.
func (s *session) prepareWorkspace(ctx context.Context, reuse string, recorded *identity) error {
	want, err := parseUser(s.spec.User)
	if err != nil {
		return err
	}
	// Who owns what the backend makes: the requested user (a uid alone
	// with the group of its own number, as commands get it), the user a
	// rebuilt session had, or (nil) like where it is made.
	var makeAs *owned.Owner
	switch {
	case want.set:
		makeAs = want.id.owner()
	case recorded != nil:
		makeAs = recorded.owner()
	}
	snap := s.spec.Snapshot
	if snap != "" && reuse == "" && s.c.opts.Snapshots == nil {
		return sandbox.Errorf(sandbox.ErrInvalid, "docker: spec names snapshot %s but the client has no snapshot store", snap)
	}
	var ws *owned.Path
	switch {
	case reuse != "":
		ws, err = owned.Open(reuse)
	case s.spec.Workspace == "":
		if makeAs == nil {
			makeAs = newWorkspaceUser().owner()
		}
		var dir string
		if dir, err = os.MkdirTemp("", workspacePrefix+s.id+"-"); err != nil {
			return sandbox.Wrap("docker: create workspace", nil, err)
		}
		s.workspace, s.ownsWS = dir, true
		// What a snapshot restored into it may hold: --disk, or the
		// tmpfs's size.
		bound := s.spec.Policy.Resources.DiskBytes
		if canBound() {
			// Bounded (workspace.go): a directory in a tmpfs on dir.
			if bound <= 0 {
				bound = defaultWorkspaceBytes
			}
			if s.workspace, err = boundWorkspace(dir, bound); err != nil {
				_ = os.Remove(dir)
				return err
			}
			s.tmpfsDir = dir
			if snap == "" {
				if err := os.Mkdir(s.workspace, 0o700); err != nil {
					return sandbox.Wrap("docker: create workspace", nil, err)
				}
			}
		}
		// MkdirTemp made it 0700 and ours, in a sticky directory: no one
		// else can enter, rename or replace it before it is given away.
		if snap != "" {
			ws, err = owned.Restore(ctx, s.c.opts.Snapshots, snap, s.workspace, makeAs, bound)
		} else if ws, err = owned.Open(s.workspace); err == nil {
			err = ws.Chown(*makeAs)
		}
	case snap != "":
		ws, err = owned.Restore(ctx, s.c.opts.Snapshots, snap, s.spec.Workspace, makeAs, s.spec.Policy.Resources.DiskBytes)
	default:
		ws, _, err = owned.Make(s.spec.Workspace, 0o755, makeAs)
	}
	if err != nil {
		if errors.Is(err, owned.ErrNotEmpty) {
			return sandbox.Wrap("docker: seed workspace "+s.spec.Workspace+" from snapshot "+snap, sandbox.ErrInvalid, err)
		}
		return sandbox.Wrap("docker: workspace", nil, err)
	}
	if snap != "" && reuse == "" {
		s.snapshot = snap
	}
	s.binds.ws, s.workspace = ws, ws.Name
	if !ws.Mode.IsDir() {
		return sandbox.Errorf(sandbox.ErrInvalid, "docker: workspace %s is not a directory", ws.Name)
	}
	s.who = ownerOf(ws)
	if want.set && (want.id.uid != s.who.uid || want.gidSet && want.id.gid != s.who.gid) {
		return sandbox.Errorf(sandbox.ErrPolicyUnsupported,
			"docker: cannot run as user %s in workspace %s: the docker backend runs commands as the workspace's owner, since the engine cannot map user ids into a container, so that what they create is the owner's; leave the user unset to run as %s, or use a directory that %s owns",
			s.spec.User, ws, s.who, want.id)
	}
	if ws.Mode.Perm()&0o200 == 0 && !readOnlyRoot(s.spec) {
		return sandbox.Errorf(sandbox.ErrPolicyUnsupported,
			"docker: workspace %s is not writable by its owner, whom commands run as: chmod u+w %s, or make the workdir read-only in the policy",
			ws, ws.Name)
	}
	root, err := openFiles(ws.Name, s.spec.Policy)
	if err != nil {
		return err
	}
	s.root = root
	return nil
}

// readOnlyRoot reports whether the policy makes the whole workdir
// read-only, so an unwritable workspace is what was asked.
func readOnlyRoot(spec sandbox.Spec) bool {
	for _, p := range spec.Policy.Filesystem.ReadOnly {
		if filepath.Clean(p) == spec.Workdir {
			return true
		}
	}
	return false
}

// openMounts holds each Spec.Mounts source by a descriptor and refuses a
// read-write one the session user could not write, or whose files would
// not be its owner's: one that belongs to someone else, or that its owner
// may not write.
func (s *session) openMounts() error {
	for _, m := range s.spec.Mounts {
		if !filepath.IsAbs(m.Source) {
			return sandbox.Errorf(sandbox.ErrInvalid, "docker: mount source %q must be an absolute host path", m.Source)
		}
		p, err := owned.Open(m.Source)
		if err != nil {
			return sandbox.Wrap("docker: mount "+m.Source, sandbox.ErrNotFound, err)
		}
		s.binds.mounts = append(s.binds.mounts, p)
		if m.ReadOnly {
			continue
		}
		switch {
		case ownerOf(p).uid != s.who.uid:
			return sandbox.Errorf(sandbox.ErrPolicyUnsupported,
				"docker: cannot mount %s read-write at %s: it belongs to %d:%d, and commands run as %s, the owner of the workspace %s (the engine cannot map user ids, so what they wrote there would not be the directory's owner's); mount it read-only, or use a directory that %d owns",
				p, m.Target, p.Owner.UID, p.Owner.GID, s.who, s.workspace, s.who.uid)
		case p.Mode.Perm()&0o200 == 0:
			return sandbox.Errorf(sandbox.ErrPolicyUnsupported,
				"docker: cannot mount %s read-write at %s: its owner, whom commands run as, may not write it; chmod u+w %s, or mount it read-only",
				p, m.Target, p.Name)
		}
	}
	return nil
}
