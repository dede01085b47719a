package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"

	"github.com/agentbox/agentbox/manifest"
	"github.com/agentbox/agentbox/sandbox"
)

// openedSession is the session a run works in and what the runner must
// undo at the end.
type openedSession struct {
	sess sandbox.Session
	// owned: the runner created or resumed it and closes it.
	owned bool
	// how describes the resolution, for the trace ("created", "resumed",
	// "injected", "snapshot <ref>").
	how string
	// tempDirs are host directories the runner made and removes last.
	tempDirs []string
	// inputs are the hashes of what the manifest put in the session.
	inputs []manifest.Input
	// copyIn, when set, is a scratch directory holding the manifest's
	// files, to copy into the session once it runs (a client whose
	// workspaces are not on this host).
	copyIn string
}

// remoteWorkspaces is a client whose sessions' workspaces are not
// directories of this host (sandbox/kube: an emptyDir in a Pod). A
// manifest's files are materialized into a scratch directory here and
// copied into the session once it runs; its mounts are left to the
// backend, which refuses them by name.
type remoteWorkspaces interface{ RemoteWorkspaces() bool }

func hasRemoteWorkspaces(c sandbox.Client) bool {
	r, ok := c.(remoteWorkspaces)
	return ok && r.RemoteWorkspaces()
}

// openSession resolves where the run works: an injected live session,
// else a saved state, else a fresh (optionally snapshot-seeded) session
// with the manifest materialized into its workspace.
func openSession(ctx context.Context, a *SandboxAgent, cfg RunConfig) (*openedSession, error) {
	sc := cfg.Sandbox
	if sc.Session != nil {
		return &openedSession{sess: sc.Session, how: "injected " + sc.Session.ID()}, nil
	}
	if sc.Client == nil {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "agent: RunConfig.Sandbox needs a Session or a Client")
	}
	if sc.State != nil {
		sess, err := sc.Client.Resume(ctx, *sc.State)
		if err == nil {
			return &openedSession{sess: sess, owned: true, how: "resumed " + sess.State().String()}, nil
		}
		if !errors.Is(err, sandbox.ErrGone) {
			return nil, fmt.Errorf("agent: resume session %s: %w", sc.State, err)
		}
		// The sandbox is gone (stopped, crashed, the host rebooted): the
		// run goes on in a new session made from what it left.
		sess, err = sc.Client.Rebuild(ctx, *sc.State)
		if err != nil {
			return nil, fmt.Errorf("agent: session %s is gone; rebuild it: %w", sc.State, err)
		}
		return &openedSession{sess: sess, owned: true, how: "rebuilt " + sc.State.String() + " (gone) as " + sess.State().String()}, nil
	}
	spec := sc.Spec
	spec.Mounts = append([]sandbox.Mount(nil), spec.Mounts...)
	spec.Env = maps.Clone(spec.Env)
	if sc.Snapshot != "" {
		spec.Snapshot = sc.Snapshot
	}
	if a.RunAs != "" {
		spec.User = a.RunAs
	}
	o := &openedSession{owned: true, how: "created"}
	if spec.Snapshot != "" {
		o.how = "created from snapshot " + spec.Snapshot
	}
	m := cfg.Manifest
	if m == nil {
		m = a.Manifest
	}
	if m != nil {
		if err := materialize(ctx, m, &spec, sc, o); err != nil {
			o.removeTemp()
			return nil, err
		}
	}
	sess, err := sc.Client.Create(ctx, spec)
	if err != nil {
		o.removeTemp()
		return nil, fmt.Errorf("agent: create %s session: %w", sc.Client.Name(), err)
	}
	if o.copyIn != "" {
		if err := copyTree(ctx, sess, o.copyIn); err != nil {
			_ = sess.Close(context.WithoutCancel(ctx))
			o.removeTemp()
			return nil, fmt.Errorf("agent: copy the manifest's files into %s session %s: %w", sc.Client.Name(), sess.ID(), err)
		}
	}
	o.sess = sess
	o.how += " " + sess.State().String()
	return o, nil
}

// materialize writes the manifest's files into the workspace and merges
// its mounts, env and user into spec. A snapshot-seeded session takes its
// files from the snapshot (the backend needs an empty workspace for it),
// so then the files go to a scratch directory and only mounts, env and
// user are kept.
func materialize(ctx context.Context, m *manifest.Manifest, spec *sandbox.Spec, sc SandboxConfig, o *openedSession) error {
	if err := m.Validate(manifest.ValidateOptions{Base: sc.ManifestBase, Trusted: sc.TrustedManifest}); err != nil {
		return fmt.Errorf("agent: validate manifest: %w", err)
	}
	dir := spec.Workspace
	remote := hasRemoteWorkspaces(sc.Client) && spec.Workspace == ""
	if dir == "" || spec.Snapshot != "" {
		tmp, err := os.MkdirTemp("", "agentbox-workspace-")
		if err != nil {
			return fmt.Errorf("agent: make workspace directory: %w", err)
		}
		o.tempDirs = append(o.tempDirs, tmp)
		// Entered by the sandbox's ids, which the backend maps to its
		// owner's (this process's).
		if err := os.Chmod(tmp, 0o755); err != nil {
			return fmt.Errorf("agent: make workspace directory: %w", err)
		}
		dir = tmp
		switch {
		case spec.Snapshot != "":
		case remote:
			o.copyIn = tmp
		default:
			spec.Workspace = tmp
		}
	}
	uid, gid, err := manifest.OwnerOf(dir)
	if err != nil {
		return fmt.Errorf("agent: materialize manifest into %s: %w", dir, err)
	}
	mat, err := m.Materialize(ctx, dir, manifest.MaterializeOptions{Base: sc.ManifestBase, Trusted: sc.TrustedManifest, UID: uid, GID: gid})
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("agent: materialize manifest into %s (a workspace that already holds the manifest's files: resume its session, or start from an empty directory): %w", dir, err)
		}
		return fmt.Errorf("agent: materialize manifest into %s: %w", dir, err)
	}
	for _, in := range mat.Inputs {
		// A snapshot's files, not the scratch copy, are what the session
		// holds; its mounts are read in place either way.
		if spec.Snapshot == "" || in.Kind == "mount" {
			o.inputs = append(o.inputs, in)
		}
	}
	spec.Mounts = append(spec.Mounts, mat.Mounts...)
	if spec.Workdir == "" && mat.Root != "" {
		spec.Workdir = mat.Root
	}
	if len(mat.Env) > 0 && spec.Env == nil {
		spec.Env = map[string]string{}
	}
	for k, v := range mat.Env {
		if _, set := spec.Env[k]; !set {
			spec.Env[k] = v
		}
	}
	if spec.User == "" && mat.User != "" {
		spec.User = mat.User
	}
	return nil
}

func (o *openedSession) removeTemp() {
	for _, d := range o.tempDirs {
		_ = os.RemoveAll(d)
	}
	o.tempDirs = nil
}
