package linux

import (
	"context"
	"fmt"
	"time"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/linux/control"
)

// The idle timeout is the init's to enforce (nsinit's idleClock): it
// sees every request and every command's end, and it holds whatever
// becomes of the client. Extend is a request that is only a use.

// Extend starts the session's idle period again.
func (s *session) Extend(ctx context.Context) error {
	if err := s.live("extend"); err != nil {
		return err
	}
	if frozen, err := s.g.Frozen(); err == nil && frozen {
		return nil // a frozen init cannot answer; its idle clock restarts at unpause
	}
	conn, err := s.dial("extend")
	if err != nil {
		return err
	}
	defer conn.Close()
	if d, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(d)
	} else {
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	}
	if err := control.Send(conn, control.Request{Op: control.OpExtend}); err != nil {
		return sandbox.Wrap("linux: extend", sandbox.ErrGone, fmt.Errorf("session %s: %w", s.st.ID, err))
	}
	var r control.Reply
	if _, err := control.Recv(conn, &r, control.MaxReply); err != nil {
		return sandbox.Wrap("linux: extend", sandbox.ErrGone, fmt.Errorf("session %s: %w", s.st.ID, err))
	}
	if r.Error != "" {
		return sandbox.Wrap("linux: extend", nil, fmt.Errorf("session %s: the init says: %s", s.st.ID, r.Error))
	}
	return nil
}
