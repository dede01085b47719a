package linux

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/linux/control"
)

// An exposed port is reached through the session's init, as the egress
// listener is made: the init, which lives in the sandbox's network
// namespace, connects to 127.0.0.1:port and hands the connected socket
// over the control socket. A socket keeps the namespace it was made in,
// so the client relays it from outside; no privilege is needed (entering
// the namespace would need root), nothing is listening on the host until
// a caller chooses to (agentbox session forward), and the init connects
// to nothing but its own loopback.

// DialPort connects to an exposed port on the sandbox's loopback.
func (s *session) DialPort(ctx context.Context, port int) (net.Conn, error) {
	const op = "linux: dial port"
	if err := s.live("dial port"); err != nil {
		return nil, err
	}
	if err := s.refuseIfPaused("dial port"); err != nil {
		return nil, err
	}
	if err := sandbox.CheckExposed(s.st.Spec, port); err != nil {
		return nil, err
	}
	c, err := s.dial("dial port")
	if err != nil {
		return nil, err
	}
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = c.SetDeadline(deadline)
	if err := control.Send(c, control.Request{Op: control.OpConnect, Port: port}); err != nil {
		return nil, sandbox.Wrap(op, nil, fmt.Errorf("port %d: %w", port, err))
	}
	var r control.Reply
	files, err := control.Recv(c, &r, control.MaxReply)
	if err != nil {
		return nil, sandbox.Wrap(op, nil, fmt.Errorf("port %d: %w", port, err))
	}
	defer control.CloseAll(files)
	switch {
	case r.NotFound:
		return nil, sandbox.Wrap(op, sandbox.ErrNotFound, fmt.Errorf("nothing listens on port %d in session %s", port, s.ID()))
	case r.Error != "":
		return nil, sandbox.Wrap(op, nil, fmt.Errorf("port %d: %s", port, r.Error))
	case len(files) != 1:
		return nil, sandbox.Wrap(op, nil, fmt.Errorf("port %d: the init sent %d descriptors, want 1", port, len(files)))
	}
	conn, err := net.FileConn(files[0])
	if err != nil {
		return nil, sandbox.Wrap(op, nil, fmt.Errorf("port %d: %w", port, err))
	}
	return conn, nil
}
