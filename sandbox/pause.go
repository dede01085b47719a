package sandbox

import (
	"context"
	"fmt"
)

// Pauser is a session whose processes can be frozen where they stand and
// later continue. A paused session keeps its memory, its files and its
// processes' state and uses no CPU; it cannot start commands until it is
// unpaused. Time keeps running while it is paused: a command's timeout
// and the session's timeout count the paused time.
//
// Backends implement it where they can freeze a whole session at once
// (the native backend with cgroup2's cgroup.freeze, docker with the
// engine's pause); use the package functions Pause, Unpause and Paused,
// which say by name when a backend cannot.
type Pauser interface {
	// Pause freezes every process of the session and returns once the
	// kernel says all of them are frozen. Pausing a paused session does
	// nothing.
	Pause(ctx context.Context) error
	// Unpause lets the session's processes continue. Unpausing a session
	// that is not paused does nothing.
	Unpause(ctx context.Context) error
	// Paused reports whether the session is paused now, as the kernel or
	// engine sees it (another process may have paused it).
	Paused(ctx context.Context) (bool, error)
}

// Pause freezes session s (see Pauser), or says that its backend cannot.
func Pause(ctx context.Context, s Session) error {
	p, err := pauser(s, "pause")
	if err != nil {
		return err
	}
	return p.Pause(ctx)
}

// Unpause lets a paused session s continue (see Pauser).
func Unpause(ctx context.Context, s Session) error {
	p, err := pauser(s, "unpause")
	if err != nil {
		return err
	}
	return p.Unpause(ctx)
}

// Paused reports whether session s is paused; false for a backend that
// cannot pause.
func Paused(ctx context.Context, s Session) (bool, error) {
	p, ok := s.(Pauser)
	if !ok {
		return false, nil
	}
	return p.Paused(ctx)
}

func pauser(s Session, op string) (Pauser, error) {
	p, ok := s.(Pauser)
	if !ok {
		return nil, Wrap(op, ErrUnsupported, fmt.Errorf("session %s: the %s backend cannot pause a session", s.ID(), s.State().Backend))
	}
	return p, nil
}
