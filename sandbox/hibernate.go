package sandbox

import (
	"context"
	"errors"
	"fmt"
	"maps"
)

// Hibernator is a session whose processes can be saved to disk with
// their memory and ended, so that it holds no memory, and later restored
// where they stood. Use the package functions Hibernate and Wake, which
// say by name when a backend cannot; where it cannot, Stop (the
// processes end, the workspace stays) and Client.Rebuild, or Fork, keep
// the files but not the processes.
type Hibernator interface {
	// Hibernate saves every process of the session and ends them.
	Hibernate(ctx context.Context) error
	// Wake restores what Hibernate saved.
	Wake(ctx context.Context) error
}

// Hibernate saves session s's processes to disk and ends them (see
// Hibernator), or says why its backend cannot.
func Hibernate(ctx context.Context, s Session) error {
	h, ok := s.(Hibernator)
	if !ok {
		return Wrap("hibernate", ErrUnsupported, fmt.Errorf("session %s: the %s backend cannot save processes to disk; Stop keeps the workspace, and Rebuild makes a session on it", s.ID(), s.State().Backend))
	}
	return h.Hibernate(ctx)
}

// Wake restores what Hibernate saved of session s.
func Wake(ctx context.Context, s Session) error {
	h, ok := s.(Hibernator)
	if !ok {
		return Wrap("wake", ErrUnsupported, fmt.Errorf("session %s: the %s backend cannot save processes to disk", s.ID(), s.State().Backend))
	}
	return h.Wake(ctx)
}

// ForkLabel is the label a forked session carries: the id of the
// session it was forked from.
const ForkLabel = "agentbox.fork-of"

// Fork makes a new session with c from a snapshot of session s's
// workspace: the same spec, a workspace of its own seeded with s's files
// as they were, and none of s's processes (their memory is not copied).
// While the snapshot is taken s is paused, where its backend can pause,
// so that the copy is of one moment; a session that was paused stays so,
// one that was not goes on. c must have a snapshot store.
func Fork(ctx context.Context, c Client, s Session) (Session, error) {
	paused, err := Paused(ctx, s)
	if err != nil {
		return nil, Wrap("fork", nil, fmt.Errorf("session %s: %w", s.ID(), err))
	}
	if !paused {
		switch err := Pause(ctx, s); {
		case err == nil:
			defer func() { _ = Unpause(context.WithoutCancel(ctx), s) }()
		case errors.Is(err, ErrUnsupported):
			// Copied as it runs: a file written meanwhile may be
			// caught half-way, as by any copy of a live directory.
		default:
			return nil, Wrap("fork", nil, fmt.Errorf("pause session %s for its snapshot: %w", s.ID(), err))
		}
	}
	ref, err := s.Snapshot(ctx)
	if err != nil {
		return nil, Wrap("fork", nil, fmt.Errorf("snapshot session %s: %w", s.ID(), err))
	}
	spec := s.State().Spec
	spec.Workspace = ""
	spec.Snapshot = ref
	spec.Labels = maps.Clone(spec.Labels)
	if spec.Labels == nil {
		spec.Labels = map[string]string{}
	}
	spec.Labels[ForkLabel] = s.ID()
	fork, err := c.Create(ctx, spec)
	if err != nil {
		return nil, Wrap("fork", nil, fmt.Errorf("create the fork of session %s from snapshot %s: %w", s.ID(), ref, err))
	}
	return fork, nil
}
