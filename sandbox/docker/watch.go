package docker

import (
	"context"
	"fmt"
	"path"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/wsfs"
)

// Watch reports changes under a workspace path (see sandbox.Watcher). The
// watch runs on the host, on the workspace the container binds (inotify
// marks inodes, so the container's writes are seen there); denied paths
// in it, which the host's view still shows, are neither watched nor
// reported. The watches end when the session closes.
func (s *session) Watch(ctx context.Context, p string) (<-chan sandbox.WatchEvent, error) {
	if err := s.live(); err != nil {
		return nil, err
	}
	loc, err := s.locate(p)
	if err != nil {
		return nil, err
	}
	if !loc.inWS {
		return nil, sandbox.Wrap("docker: watch "+p, sandbox.ErrInvalid, fmt.Errorf("only workspace paths can be watched, and %s is outside %s or under a mount", loc.abs, s.spec.Workdir))
	}
	if s.root == nil {
		return nil, sandbox.Wrap("docker: watch", sandbox.ErrUnsupported, fmt.Errorf("session %s: the workspace is not visible from this host", s.id))
	}
	var exclude []string
	for i := range s.spec.Mounts {
		if rel, err := sandbox.ResolveWorkspacePath(s.spec.Workdir, path.Clean(s.spec.Mounts[i].Target)); err == nil && rel != "." {
			exclude = append(exclude, rel)
		}
	}
	ch, err := s.watches.Watch(ctx, s.root, loc.rel, wsfs.WatchOptions{Exclude: append(exclude, sandbox.DeniedInWorkspace(s.spec)...)})
	if err != nil {
		return nil, sandbox.Wrap("docker: watch", nil, err)
	}
	return ch, nil
}
