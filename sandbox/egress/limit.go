package egress

import (
	"net"
	"sync"
)

// limitListener bounds the number of open accepted connections: Accept
// waits for a slot, and a slot frees when its connection is closed
// (including a hijacked CONNECT tunnel's). It stops waiting when done is
// closed.
type limitListener struct {
	net.Listener
	slots chan struct{}
	done  <-chan struct{}
}

func newLimitListener(l net.Listener, n int, done <-chan struct{}) *limitListener {
	return &limitListener{Listener: l, slots: make(chan struct{}, n), done: done}
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.slots }}, nil
}

// limitConn frees its slot once, on the first Close.
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
