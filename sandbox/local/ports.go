package local

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"

	"github.com/agentbox/agentbox/sandbox"
)

// DialPort connects to an exposed port. A local session has no network
// of its own: its commands listen on the host's loopback, so the port is
// the host's 127.0.0.1:port, and so is anything else they listen on.
func (s *session) DialPort(ctx context.Context, port int) (net.Conn, error) {
	if err := s.usable("dial port"); err != nil {
		return nil, err
	}
	if err := sandbox.CheckExposed(s.st.Spec, port); err != nil {
		return nil, err
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return nil, sandbox.Wrap("local: dial port", sandbox.ErrNotFound, fmt.Errorf("nothing listens on port %d (session %s)", port, s.st.ID))
		}
		return nil, sandbox.Wrap("local: dial port", nil, err)
	}
	return conn, nil
}
