package linux

import (
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/agentbox/agentbox/sandbox/linux/control"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/egress"
)

// egressBridge is a session's allow-list proxy: it runs in the client
// process, outside the sandbox, and serves a TCP listener that was
// created inside the sandbox's network namespace on 127.0.0.1, so it is
// the only way out of a namespace that has nothing but loopback.
type egressBridge struct {
	proxy *egress.Proxy
	ln    net.Listener
	port  int
	wg    sync.WaitGroup
}

// startEgress starts the proxy for the session's allow-list. The port is
// kept in the state so that a resumed session keeps its proxy address.
func (s *session) startEgress(np sandbox.NetworkPolicy) error {
	up := s.c.opts.EgressUpstream
	px, err := egress.New(egress.Config{
		Allow: np.Allow, Credentials: np.Credentials,
		Inspect: np.Inspect, Rules: np.Rules, Secrets: np.Secrets,
		Dial: up.Dial, UpstreamRoots: up.Roots,
		Logger: s.c.log.With("session", s.st.ID),
	})
	if err != nil {
		return err // egress.New's errors already say "egress:"
	}
	// The init writes the trust bundle before it hands over the
	// listener: no command can start before the sandbox trusts the CA.
	ln, err := listenInSandbox(s.h.Socket, s.h.ProxyPort, string(px.CACert()))
	if err != nil {
		_ = px.Close()
		return fmt.Errorf("egress: %w", err)
	}
	b := &egressBridge{proxy: px, ln: ln, port: ln.Addr().(*net.TCPAddr).Port}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		_ = px.Serve(ln)
	}()
	s.mu.Lock()
	s.egress = b
	s.h.ProxyPort = b.port
	s.mu.Unlock()
	return nil
}

// stopEgress closes the proxy and its listener.
func (s *session) stopEgress() {
	s.mu.Lock()
	b := s.egress
	s.egress = nil
	s.mu.Unlock()
	if b == nil {
		return
	}
	_ = b.proxy.Close()
	_ = b.ln.Close()
	b.wg.Wait()
}

// env is what commands need to use the proxy.
func (b *egressBridge) env() map[string]string {
	u := "http://127.0.0.1:" + strconv.Itoa(b.port)
	m := map[string]string{
		"HTTP_PROXY": u, "HTTPS_PROXY": u, "http_proxy": u, "https_proxy": u,
		"ALL_PROXY": u, "all_proxy": u,
		"NO_PROXY": "localhost,127.0.0.1,::1", "no_proxy": "localhost,127.0.0.1,::1",
	}
	if b.proxy.CACert() != nil {
		for _, k := range egress.TrustEnv {
			m[k] = control.TrustBundle
		}
	}
	for k, v := range b.proxy.Placeholders() {
		m[k] = v
	}
	return m
}

func (b *egressBridge) denialCount() uint64 { return b.proxy.Refused() }

// denialsSince are the refusals recorded after the first n, one line
// each, for ExitStatus.Violations.
func (b *egressBridge) denialsSince(n uint64) []string {
	var out []string
	for _, d := range b.proxy.DenialsSince(n) {
		out = append(out, sandbox.EgressViolation(d.String()))
	}
	return out
}

// listenInSandbox asks the session's init for a TCP listener on its
// loopback, 127.0.0.1:port (any port when 0 or taken), and returns it;
// with caPEM, the init first writes the trust bundle holding it. A
// socket keeps the network namespace it was made in, so the client can
// serve it from outside, and asking the init, which lives in that
// namespace, needs no privilege: entering the namespace (setns) would need
// root, which a rootless client does not have.
func listenInSandbox(sock string, port int, caPEM string) (net.Listener, error) {
	c, err := control.Dial(sock)
	if err != nil {
		return nil, fmt.Errorf("reach the sandbox's init: %w", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if err := control.Send(c, control.Request{Op: control.OpListen, Port: port, CACert: caPEM}); err != nil {
		return nil, fmt.Errorf("ask for a loopback listener: %w", err)
	}
	var r control.Reply
	files, err := control.Recv(c, &r, control.MaxReply)
	if err != nil {
		return nil, fmt.Errorf("ask for a loopback listener: %w", err)
	}
	defer control.CloseAll(files)
	if r.Error != "" {
		return nil, fmt.Errorf("listen on the sandbox's loopback: %s", r.Error)
	}
	if len(files) != 1 {
		return nil, fmt.Errorf("listen on the sandbox's loopback: the init sent %d descriptors, want 1", len(files))
	}
	ln, err := net.FileListener(files[0])
	if err != nil {
		return nil, fmt.Errorf("listen on the sandbox's loopback: %w", err)
	}
	if _, ok := ln.Addr().(*net.TCPAddr); !ok {
		ln.Close()
		return nil, fmt.Errorf("listen on the sandbox's loopback: got a %s listener", ln.Addr().Network())
	}
	return ln, nil
}
