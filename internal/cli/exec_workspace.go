package cli

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"

	"github.com/agentbox/agentbox/manifest"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/linux"
	"github.com/agentbox/agentbox/snapshot"
)

// workspaceFlags are the workspace-contract flags of `exec`: a manifest
// to materialize, a snapshot to seed from, and whether to save one after.
type workspaceFlags struct {
	manifest     string
	snapshot     string
	saveSnapshot bool
	store        string
}

// preparedWorkspace is a workspace ready for Create, and how to undo it.
type preparedWorkspace struct {
	store   *snapshot.Store
	cleanup func()
	// keep lets a temporary workspace outlive this process (a detached
	// session's, which session rm removes); nil when there is none.
	keep func()
	// temp is the temporary workspace prepare made, if any.
	temp string
}

// prepare validates the manifest and snapshot reference, then (only when
// both are good) materializes the manifest into the workspace, creating a
// temporary one that cleanup removes when spec has none.
func (w *workspaceFlags) prepare(ctx context.Context, spec *sandbox.Spec, userGiven bool) (*preparedWorkspace, error) {
	pw := &preparedWorkspace{cleanup: func() {}}
	var m *manifest.Manifest
	var base string
	if w.manifest != "" {
		var err error
		if m, err = manifest.Load(w.manifest); err != nil {
			return nil, err
		}
		abs, err := filepath.Abs(w.manifest)
		if err != nil {
			return nil, err
		}
		base = filepath.Dir(abs)
		if err := m.Validate(manifest.ValidateOptions{Base: base, Trusted: true}); err != nil {
			return nil, err
		}
		if root := m.EffectiveRoot(); root != spec.Workdir {
			spec.Workdir = root
		}
	}
	if w.snapshot != "" || w.saveSnapshot {
		st, err := snapshot.Open(w.store, snapshot.Options{})
		if err != nil {
			return nil, fmt.Errorf("snapshot store %s: %w", w.store, err)
		}
		pw.store = st
		if w.snapshot != "" {
			info, err := st.Get(ctx, w.snapshot)
			if err != nil {
				return nil, fmt.Errorf("--snapshot %s: %w (agentbox snapshot ls lists them)", w.snapshot, err)
			}
			spec.Snapshot = info.ID
		}
	}
	if m == nil {
		return pw, nil
	}
	if spec.Workspace == "" {
		// Made before the session, it goes with this process as the
		// session does, however this process ends (kill -9 included).
		sd, err := linux.NewScratchDir("", "agentbox-ws-")
		if err != nil {
			return nil, err
		}
		// Entered by the sandbox's ids, which the backend maps to its
		// owner's (this process's).
		if err := os.Chmod(sd.Path, 0o755); err != nil {
			_ = sd.Remove()
			return nil, err
		}
		spec.Workspace = sd.Path
		pw.cleanup = func() { _ = sd.Remove() }
		pw.keep = sd.Keep
		pw.temp = sd.Path
	}
	uid, gid, err := manifest.OwnerOf(spec.Workspace)
	if err != nil {
		pw.cleanup()
		return nil, err
	}
	mat, err := m.Materialize(ctx, spec.Workspace, manifest.MaterializeOptions{Base: base, Trusted: true, UID: uid, GID: gid})
	if err != nil {
		pw.cleanup()
		return nil, err
	}
	spec.Mounts = append(mat.Mounts, spec.Mounts...)
	env := maps.Clone(mat.Env)
	maps.Copy(env, spec.Env)
	spec.Env = env
	if !userGiven && mat.User != "" {
		spec.User = mat.User
	}
	return pw, nil
}
