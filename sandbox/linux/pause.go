package linux

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/linux/cgroups"
)

// A session is paused by freezing its cgroup2 group (cgroup.freeze): the
// init, its helpers and every command stop where they stand and keep
// their memory, which stays charged to the session's memory limit. The
// freeze lives in the kernel, not in this process: a session paused by
// one agentbox stays paused for the next, and Paused reads it back.

// Pause freezes every process of the session.
func (s *session) Pause(ctx context.Context) error {
	if err := s.live("pause"); err != nil {
		return err
	}
	if err := s.g.Freeze(ctx); err != nil {
		return s.freezeError("pause", err)
	}
	return nil
}

// Unpause lets the session's processes continue.
func (s *session) Unpause(ctx context.Context) error {
	if err := s.live("unpause"); err != nil {
		return err
	}
	if err := s.g.Thaw(ctx); err != nil {
		return s.freezeError("unpause", err)
	}
	return nil
}

// Paused reports whether the session's group is frozen.
func (s *session) Paused(context.Context) (bool, error) {
	frozen, err := s.g.Frozen()
	if err != nil {
		return false, sandbox.Wrap("linux: paused", nil, err)
	}
	return frozen, nil
}

// refuseIfPaused keeps a command from being started in a frozen session:
// its init could not answer, and the caller would wait for ever.
func (s *session) refuseIfPaused(op string) error {
	if frozen, err := s.g.Frozen(); err == nil && frozen {
		return sandbox.Wrap("linux: "+op, sandbox.ErrPaused, fmt.Errorf("session %s is paused; unpause it first (agentbox session unpause %s)", s.st.ID, s.st.ID))
	}
	return nil
}

func (s *session) freezeError(op string, err error) error {
	if errors.Is(err, cgroups.ErrNoFreezer) {
		return sandbox.Wrap("linux: "+op, sandbox.ErrUnsupported, fmt.Errorf("session %s: %w", s.st.ID, err))
	}
	return sandbox.Wrap("linux: "+op, nil, fmt.Errorf("session %s: %w", s.st.ID, err))
}
