package remote

import (
	"context"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/server/api"
)

var _ sandbox.Extender = (*session)(nil)

// Extend starts the session's idle period again: a PATCH that changes
// nothing is a use of the session, to the server's idle timeout and to
// its backend's.
func (s *session) Extend(ctx context.Context) error {
	if err := s.live("extend"); err != nil {
		return err
	}
	return s.c.do(ctx, "remote: extend", "PATCH", s.path(""), api.UpdateSession{}, nil)
}
