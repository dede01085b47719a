package local

import (
	"context"
	"time"
)

// The idle timeout, kept by this process as the session timeout is: the
// session is busy while a command it started runs (its leader not yet
// reaped) and idle otherwise; idle for the timeout, it ends as an expired
// one does, its leftover process groups killed.

// began notes a command started; s.mu is held.
func (s *session) began() {
	s.running++
	if s.idle != nil {
		s.idle.Stop()
	}
}

// ended notes a command's leader reaped.
func (s *session) ended() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running--
	s.rearm()
}

// rearm starts the idle period again when nothing runs; s.mu is held.
func (s *session) rearm() {
	if s.idle != nil && s.running == 0 && !s.closed && !s.stopped && !s.idled {
		s.idleSince = time.Now()
		s.idle.Reset(s.st.Spec.Policy.Resources.IdleTimeout)
	}
}

// idleOut ends the session, unless a command began meanwhile.
func (s *session) idleOut() {
	s.mu.Lock()
	// A use just before the timer fired re-armed it: not idle yet.
	if s.running > 0 || s.closed || s.stopped || time.Since(s.idleSince) < s.st.Spec.Policy.Resources.IdleTimeout {
		s.mu.Unlock()
		return
	}
	s.idled = true
	procs := s.takeProcs()
	s.mu.Unlock()
	_ = killAll(procs, false)
}

// Extend starts the idle period again.
func (s *session) Extend(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable("extend"); err != nil {
		return err
	}
	s.rearm()
	return nil
}
