package remote

import (
	"context"
	"net"
	"net/http"
	"strconv"

	"github.com/coder/websocket"

	"github.com/agentbox/agentbox/sandbox"
)

var _ sandbox.PortDialer = (*session)(nil)

// DialPort connects to an exposed port of the session through the
// server's port route: one WebSocket, its binary messages the bytes of
// the connection. The server dials before it upgrades, so a port not
// exposed, nothing listening or a backend that cannot answer as errors of
// their kind.
func (s *session) DialPort(ctx context.Context, port int) (net.Conn, error) {
	op := "remote: dial port " + strconv.Itoa(port)
	if err := s.live("dial port"); err != nil {
		return nil, err
	}
	h := http.Header{}
	h.Set("Authorization", "Bearer "+s.c.token)
	// The connection outlives ctx; only the handshake is bounded.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dialTimeout)
	stopOnCancel := context.AfterFunc(ctx, cancel)
	conn, resp, err := websocket.Dial(dctx, s.c.base+s.path("/ports/"+strconv.Itoa(port)), &websocket.DialOptions{HTTPClient: s.c.hc, HTTPHeader: h})
	stopOnCancel()
	cancel()
	if err != nil {
		if resp != nil && resp.StatusCode >= 400 {
			return nil, decodeError(op, resp)
		}
		return nil, &sandbox.Error{Op: op, Kind: sandbox.ErrUnavailable, Err: err, Retryable: true}
	}
	conn.SetReadLimit(1 << 20)
	return websocket.NetConn(context.Background(), conn, websocket.MessageBinary), nil
}
