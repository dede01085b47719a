package remote

import (
	"context"
	"io/fs"
	"net/url"
	"strconv"
	"sync"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/server/api"
)

// session is a session on the server.
type session struct {
	c *Client

	mu     sync.Mutex
	st     sandbox.State
	closed bool
}

var _ sandbox.Session = (*session)(nil)

func (s *session) ID() string { return s.st.ID }

func (s *session) path(suffix string) string {
	return "/v1/sessions/" + url.PathEscape(s.st.ID) + suffix
}

// live fails with ErrClosed after Close.
func (s *session) live(op string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return sandbox.Errorf(sandbox.ErrClosed, "remote: %s: session %s is closed", op, s.st.ID)
	}
	return nil
}

func (s *session) ReadFile(ctx context.Context, path string) ([]byte, error) {
	if err := s.live("read file"); err != nil {
		return nil, err
	}
	var data []byte
	err := s.c.do(ctx, "remote: read "+path, "GET", s.path("/files?path="+url.QueryEscape(path)), nil, &data)
	return data, err
}

func (s *session) WriteFile(ctx context.Context, path string, data []byte, mode fs.FileMode) error {
	if err := s.live("write file"); err != nil {
		return err
	}
	q := "?path=" + url.QueryEscape(path) + "&mode=" + strconv.FormatUint(uint64(mode.Perm()), 8)
	if data == nil {
		data = []byte{}
	}
	return s.c.do(ctx, "remote: write "+path, "PUT", s.path("/files"+q), data, nil)
}

func (s *session) ListDir(ctx context.Context, path string) ([]sandbox.FileInfo, error) {
	if err := s.live("list"); err != nil {
		return nil, err
	}
	var l api.FileList
	err := s.c.do(ctx, "remote: list "+path, "GET", s.path("/dir?path="+url.QueryEscape(path)), nil, &l)
	return l.Files, err
}

func (s *session) Snapshot(ctx context.Context) (string, error) {
	if err := s.live("snapshot"); err != nil {
		return "", err
	}
	var snap api.Snapshot
	if err := s.c.do(ctx, "remote: snapshot", "POST", s.path("/snapshots"), nil, &snap); err != nil {
		return "", err
	}
	s.mu.Lock()
	s.st.Snapshot = snap.ID
	s.mu.Unlock()
	return snap.ID, nil
}

func (s *session) State() sandbox.State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st
}

// Stop ends the sandbox on the server, which keeps its workspace and
// snapshot for a rebuild.
func (s *session) Stop(ctx context.Context) error {
	if err := s.live("stop"); err != nil {
		return err
	}
	return s.c.do(ctx, "remote: stop", "POST", s.path("/stop"), nil, nil)
}

// Close deletes the session on the server; closing twice, or a session
// the server no longer has, is not an error.
func (s *session) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	st := s.st
	s.mu.Unlock()
	return s.c.Delete(ctx, st)
}

var _ sandbox.Pauser = (*session)(nil)

// Pause freezes the session's processes on the server.
func (s *session) Pause(ctx context.Context) error {
	if err := s.live("pause"); err != nil {
		return err
	}
	return s.c.do(ctx, "remote: pause", "POST", s.path("/pause"), nil, nil)
}

// Unpause lets the session's processes continue.
func (s *session) Unpause(ctx context.Context) error {
	if err := s.live("unpause"); err != nil {
		return err
	}
	return s.c.do(ctx, "remote: unpause", "POST", s.path("/unpause"), nil, nil)
}

// Paused asks the server, which asks the backend (another client may
// have paused the session).
func (s *session) Paused(ctx context.Context) (bool, error) {
	if err := s.live("paused"); err != nil {
		return false, err
	}
	var v api.Session
	if err := s.c.do(ctx, "remote: paused", "GET", s.path(""), nil, &v); err != nil {
		return false, err
	}
	return v.Status == api.StatusPaused, nil
}
