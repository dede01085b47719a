package linux

import (
	"context"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/wsfs"
)

// Watch reports changes under a workspace path. The watch runs here, on
// the host, on the workspace as the init sees it (/proc/PID/root/...,
// the root the file API uses), so mounts in the workspace are watched as
// the sandbox sees them; it ends when the session stops or closes.
func (s *session) Watch(ctx context.Context, p string) (<-chan sandbox.WatchEvent, error) {
	rel, err := sandbox.ResolveWorkspacePath(s.workdir(), p)
	if err != nil {
		return nil, err
	}
	r, err := s.fsRoot("watch")
	if err != nil {
		return nil, err
	}
	ch, err := s.watches.Watch(ctx, r, rel, wsfs.WatchOptions{Exclude: sandbox.DeniedInWorkspace(s.st.Spec)})
	if err != nil {
		return nil, sandbox.Wrap("linux: watch", nil, err)
	}
	return ch, nil
}
