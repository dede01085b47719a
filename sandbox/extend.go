package sandbox

import (
	"context"
	"fmt"
)

// Extender is a session whose idle timeout (Resources.IdleTimeout) can be
// put off without running anything in it. Backends that enforce the idle
// timeout implement it; use the package function Extend.
type Extender interface {
	// Extend counts as a use of the session: its idle period starts
	// again from now. A paused session's starts again at unpause anyway.
	Extend(ctx context.Context) error
}

// Extend puts off session s's idle timeout (see Extender), or says that
// its backend cannot.
func Extend(ctx context.Context, s Session) error {
	e, ok := s.(Extender)
	if !ok {
		return Wrap("extend", ErrUnsupported, fmt.Errorf("session %s: the %s backend has no idle timeout to put off", s.ID(), s.State().Backend))
	}
	return e.Extend(ctx)
}
