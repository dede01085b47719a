package local

import (
	"context"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/wsfs"
)

// Watch reports changes under a workspace path (see sandbox.Watcher); the
// watches end when the session closes.
func (s *session) Watch(ctx context.Context, p string) (<-chan sandbox.WatchEvent, error) {
	rel, err := s.rel(p)
	if err != nil {
		return nil, err
	}
	if err := s.filesUsable("watch"); err != nil {
		return nil, err
	}
	ch, err := s.watches.Watch(ctx, s.root, rel, wsfs.WatchOptions{Exclude: sandbox.DeniedInWorkspace(s.st.Spec)})
	if err != nil {
		return nil, sandbox.Wrap("local: watch", nil, err)
	}
	return ch, nil
}
