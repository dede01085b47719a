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

// Stop deletes the Pod: its processes end and its emptyDir workspace with
// them; what Rebuild needs is the latest snapshot, kept in State.
func (s *session) Stop(ctx context.Context) error {
	return s.c.deleteObjects(ctx, s.h.Namespace, s.id)
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
	return s.c.deleteObjects(ctx, s.h.Namespace, s.id)
}
