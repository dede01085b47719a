package docker

import (
	"context"
	"fmt"

	"github.com/moby/moby/client"

	"github.com/agentbox/agentbox/sandbox"
)

// A session is paused with the engine's pause, which freezes the
// container's cgroup: its processes keep their memory (charged to the
// container's limit) and use no CPU. The engine keeps the state, so a
// session paused by one agentbox is paused for the next.

// Pause freezes every process of the session's container.
func (s *session) Pause(ctx context.Context) error {
	if err := s.live(); err != nil {
		return err
	}
	if paused, err := s.Paused(ctx); err != nil || paused {
		return err
	}
	if _, err := s.c.api.ContainerPause(ctx, s.containerID, client.ContainerPauseOptions{}); err != nil {
		return s.execError("pause", err)
	}
	return nil
}

// Unpause lets the container's processes continue.
func (s *session) Unpause(ctx context.Context) error {
	if err := s.live(); err != nil {
		return err
	}
	if paused, err := s.Paused(ctx); err != nil || !paused {
		return err
	}
	if _, err := s.c.api.ContainerUnpause(ctx, s.containerID, client.ContainerUnpauseOptions{}); err != nil {
		return s.execError("unpause", err)
	}
	return nil
}

// Paused asks the engine whether the container is paused.
func (s *session) Paused(ctx context.Context) (bool, error) {
	insp, err := s.c.api.ContainerInspect(ctx, s.containerID, client.ContainerInspectOptions{})
	if err != nil {
		return false, s.execError("inspect", err)
	}
	return insp.Container.State != nil && insp.Container.State.Paused, nil
}

// pausedError is the error of a call the engine refused because the
// container is paused.
func (s *session) pausedError() error {
	return sandbox.Wrap("docker: session "+s.id, sandbox.ErrPaused, fmt.Errorf("session %s is paused; unpause it first (agentbox session unpause %s)", s.id, s.id))
}
