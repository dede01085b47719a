package linux

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/egress"
	"golang.org/x/sys/unix"
)

// networkAllowListAvailable: the egress proxy is built in.
const networkAllowListAvailable = true

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
	want := 0
	if p := s.st.Handles["proxy_port"]; p != "" {
		want, _ = strconv.Atoi(p)
	}
	ln, err := listenInNetns(s.initPid(), want)
	if err != nil {
		return fmt.Errorf("egress: %w", err)
	}
	px, err := egress.New(egress.Config{Allow: np.Allow, Credentials: np.Credentials, Logger: s.c.log.With("session", s.st.ID)})
	if err != nil {
		ln.Close()
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
	s.st.Handles["proxy_port"] = strconv.Itoa(b.port)
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
	return map[string]string{
		"HTTP_PROXY": u, "HTTPS_PROXY": u, "http_proxy": u, "https_proxy": u,
		"ALL_PROXY": u, "all_proxy": u,
		"NO_PROXY": "localhost,127.0.0.1,::1", "no_proxy": "localhost,127.0.0.1,::1",
	}
}

func (b *egressBridge) denialCount() int { return len(b.proxy.Denials()) }

// denialsSince are the refusals recorded after the first n, one line
// each, for ExitStatus.Violations.
func (b *egressBridge) denialsSince(n int) []string {
	d := b.proxy.Denials()
	if n >= len(d) {
		return nil
	}
	out := make([]string, 0, len(d)-n)
	for _, line := range d[n:] {
		out = append(out, "egress refused: "+line)
	}
	return out
}

// listenInNetns opens a TCP listener on 127.0.0.1:port (0 for any) inside
// the network namespace of pid. The socket keeps the namespace it was
// created in, so the thread enters it only for the socket call.
func listenInNetns(pid, port int) (net.Listener, error) {
	target, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		return nil, fmt.Errorf("open the sandbox's network namespace: %w", err)
	}
	defer target.Close()
	type result struct {
		ln  net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{nil, fmt.Errorf("open own network namespace: %w", err)}
			return
		}
		defer self.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{nil, fmt.Errorf("enter the sandbox's network namespace: %w", err)}
			return
		}
		ln, lerr := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if lerr != nil && port != 0 {
			ln, lerr = net.Listen("tcp", "127.0.0.1:0")
		}
		if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
			// This thread is stuck in the sandbox's namespace: leave it
			// locked so the runtime retires it with this goroutine.
			if ln != nil {
				ln.Close()
			}
			ch <- result{nil, errors.Join(lerr, fmt.Errorf("return to own network namespace: %w", err))}
			return
		}
		runtime.UnlockOSThread()
		if lerr != nil {
			lerr = fmt.Errorf("listen on the sandbox's loopback: %w", lerr)
		}
		ch <- result{ln, lerr}
	}()
	r := <-ch
	return r.ln, r.err
}
