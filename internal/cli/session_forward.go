package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/sandbox"
)

// sessionForward is `session forward`: a host listener whose connections
// each reach an exposed port of a session.
func (a *App) sessionForward() *cobra.Command {
	var listen string
	cmd := &cobra.Command{
		Use:   "forward ID PORT",
		Short: "Serve a session's exposed port on the host, until interrupted",
		Long: `Forward listens on the host (127.0.0.1:PORT unless --listen says otherwise)
and connects each connection it accepts to PORT on the session's own
loopback, where a server in the sandbox listens (a dev server, a notebook, a
preview). The port must be one the session exposes ('session create --port
PORT'); nothing else of the sandbox is reachable, and what the sandbox may
reach is unchanged. The listening address is printed on stdout; forward runs
until it is interrupted (Ctrl-C) or the session ends.`,
		Example: `  id=$(agentbox session create --port 8000)
  agentbox exec --session "$id" -- sh -c 'python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1 &'
  agentbox session forward "$id" 8000 &
  sleep 1; curl http://127.0.0.1:8000/   # once forward has printed its address
  agentbox session forward "$id" 8000 --listen 127.0.0.1:0   # any free host port`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			port, err := strconv.Atoi(args[1])
			if err != nil || port < 1 || port > 65535 {
				return Failf("session forward: port %q: a TCP port is a number from 1 to 65535", args[1])
			}
			if listen == "" {
				listen = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
			}
			ctx, release := interruptible(cmd.Context())
			defer release()
			sess, err := a.resumeSession(ctx, id)
			if err != nil {
				return Fail(fmt.Errorf("session forward: %w", err))
			}
			if err := sandbox.CheckExposed(sess.State().Spec, port); err != nil {
				return Fail(fmt.Errorf("session forward: session %s: %w", id, err))
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return Fail(fmt.Errorf("session forward: %w", err))
			}
			defer ln.Close()
			if host, _, _ := net.SplitHostPort(ln.Addr().String()); !net.ParseIP(host).IsLoopback() {
				fmt.Fprintf(cmd.ErrOrStderr(), "agentbox: warning: %s is reachable from other hosts: anyone who can connect reaches port %d of session %s\n", ln.Addr(), port, id)
			}
			fmt.Fprintln(cmd.OutOrStdout(), ln.Addr())
			fmt.Fprintf(cmd.ErrOrStderr(), "agentbox: forwarding %s to port %d of session %s (Ctrl-C stops)\n", ln.Addr(), port, id)
			return forwardPort(ctx, ln, sess, port, cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "", "host address to listen on (`HOST:PORT`; default 127.0.0.1:PORT; port 0 takes any free one)")
	return cmd
}

// forwardPort accepts on ln until ctx ends and relays each connection to
// port of sess. A connection the sandbox refuses (nothing listens yet) is
// closed and reported, and forwarding goes on; once the session is gone,
// closed or past its timeout, forwarding stops with that error.
func forwardPort(ctx context.Context, ln net.Listener, sess sandbox.Session, port int, log io.Writer) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	var ended atomic.Pointer[error] // the session went away: why forwarding stopped
	for {
		c, err := ln.Accept()
		if err != nil {
			if why := ended.Load(); why != nil {
				return Fail(fmt.Errorf("session forward: %w", *why))
			}
			if ctx.Err() != nil {
				return nil
			}
			return Fail(fmt.Errorf("session forward: accept: %w", err))
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			in, err := sandbox.DialPort(ctx, sess, port)
			if err != nil {
				fmt.Fprintf(log, "agentbox: %s: %v\n", c.RemoteAddr(), err)
				if errors.Is(err, sandbox.ErrGone) || errors.Is(err, sandbox.ErrClosed) || errors.Is(err, sandbox.ErrTimeout) {
					ended.CompareAndSwap(nil, &err)
					ln.Close()
				}
				return
			}
			defer in.Close()
			relay(ctx, c, in)
		}()
	}
}

// relay copies both ways between a and b, passing on each side's end of
// input as a half-close, until both directions are done or ctx ends.
func relay(ctx context.Context, a, b net.Conn) {
	stop := context.AfterFunc(ctx, func() { a.Close(); b.Close() })
	defer stop()
	var wg sync.WaitGroup
	half := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			dst.Close()
		}
	}
	wg.Add(2)
	go half(a, b)
	go half(b, a)
	wg.Wait()
}
