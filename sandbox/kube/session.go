package kube

import (
	"context"
	"sync"
	"time"

	"github.com/agentbox/agentbox/sandbox"
)

// session is one Pod.
type session struct {
	c       *Client
	id      string
	spec    sandbox.Spec
	uid     int64
	h       handles
	created time.Time

	// egress is the allow-list's proxy, when the session has one.
	egress *egressLink

	mu       sync.Mutex
	snapshot string
	closed   bool
}

// ID is the session's id, the suffix of its Pod's name.
func (s *session) ID() string { return s.id }

// State describes the session for Resume: the Pod's namespace, name and
// uid, and the cluster.
func (s *session) State() sandbox.State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sandbox.State{
		Version:   sandbox.StateVersion,
		Backend:   Name,
		ID:        s.id,
		Spec:      s.spec,
		Snapshot:  s.snapshot,
		Handles:   sandbox.EncodeHandles(s.h),
		CreatedAt: s.created,
	}
}

// live fails once the session is closed.
func (s *session) live() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return sandbox.Errorf(sandbox.ErrClosed, "kube: session %s is closed", s.id)
	}
	return nil
}

// stopScript kills every process of the Pod but its init and itself:
// stopped first so that none forks while the scan runs.
const stopScript = `for sig in STOP KILL; do
	for d in /proc/[0-9]*; do p=${d#/proc/}; [ "$p" = 1 ] || [ "$p" = $$ ] || kill -$sig "$p" 2>/dev/null; done
done; exit 0`

// Stop ends every command of the session and keeps the Pod, its init and
// its workspace, so that Resume reattaches to the same session.
func (s *session) Stop(ctx context.Context) error {
	if _, err := s.run(ctx, "kube: stop "+s.id, stopScript, nil, 1<<10); err != nil {
		return err
	}
	return nil
}

// Close deletes the Pod and its NetworkPolicy. It is idempotent.
func (s *session) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	err := s.c.deleteObjects(ctx, s.h.Namespace, s.id)
	s.egress.close()
	return err
}
