//go:build kube

package kube

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/egress"
)

// fetchScript GETs each URL argument through the proxy the environment
// names and prints "URL STATUS BODY" per line (STATUS 0: no answer).
const fetchScript = `import sys, urllib.request, urllib.error
for u in sys.argv[1:]:
    try:
        r = urllib.request.urlopen(u, timeout=5)
        print(u, r.status, r.read().decode().strip())
    except urllib.error.HTTPError as e:
        print(u, e.code, "-")
    except Exception as e:
        print(u, 0, type(e).__name__)
`

// nodeAddress is the test node's InternalIP, where this process (on the
// node) is reached from its Pods.
func nodeAddress(t *testing.T, ctx context.Context, c *Client) string {
	t.Helper()
	nodes, err := c.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) == 0 {
		t.Fatalf("nodes: %v", err)
	}
	for _, a := range nodes.Items[0].Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	t.Fatalf("node %s has no InternalIP", nodes.Items[0].Name)
	return ""
}

// allowListSession creates a session with the allow-list policy (its
// Mode is set) whose egress proxy, on the node, reaches upstream for
// hostPort and fails to dial anything else; it returns the client (whose
// proxy it is) and the session, closed when the test ends.
func allowListSession(t *testing.T, ctx context.Context, upstream *httptest.Server, hostPort string, policy sandbox.NetworkPolicy) (*Client, sandbox.Session) {
	t.Helper()
	up := egress.Upstream{Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr != hostPort {
			return nil, fmt.Errorf("test upstream: no route to %s", addr)
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", upstream.Listener.Addr().String())
	}}
	if cert := upstream.Certificate(); cert != nil {
		up.Roots = x509.NewCertPool()
		up.Roots.AddCert(cert)
	}
	c := testClient(t, Options{EgressAddress: nodeAddress(t, ctx, testClient(t, Options{})), EgressUpstream: up})
	policy.Mode = sandbox.NetworkAllowList
	sess, err := c.Create(ctx, sandbox.Spec{Policy: sandbox.Policy{Network: policy}})
	if err != nil {
		t.Fatalf("a session with an allow-list: %v", err)
	}
	t.Cleanup(func() { sess.Close(context.Background()) })
	return c, sess
}

// output runs req in sess and returns its standard output, failing the
// test unless it exits 0.
func output(t *testing.T, ctx context.Context, sess sandbox.Session, req sandbox.ExecRequest) string {
	t.Helper()
	res, err := sandbox.Exec(ctx, sess, req)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%q: %v %+v %s", req.Cmd, err, res.ExitStatus, res.Stderr)
	}
	return string(res.Stdout)
}

// TestAllowListReachesOnlyItsHostsThroughTheProxy: a session with an
// allow-list reaches an allowed host through its egress proxy, which adds
// the host's credential the session never sees; a host not on the list
// is refused by the proxy; the API server is out of reach; another Pod
// that reaches the proxy's listener is not served; and Resume, which
// would have no proxy, refuses the session.
func TestAllowListReachesOnlyItsHostsThroughTheProxy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "upstream saw %s %s auth=%q", r.Host, r.URL.Path, r.Header.Get("Authorization"))
	}))
	t.Cleanup(upstream.Close)
	c, sess := allowListSession(t, ctx, upstream, "allowed.test:80", sandbox.NetworkPolicy{
		Allow:       []string{"allowed.test"},
		Credentials: map[string]map[string]string{"allowed.test": {"Authorization": "Bearer s3cret"}},
	})

	res, err := sandbox.Exec(ctx, sess, sandbox.ExecRequest{Cmd: []string{"python3", "-c", fetchScript, "http://allowed.test/hello", "http://denied.test/"}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("fetch through the proxy: %v %+v %s", err, res.ExitStatus, res.Stderr)
	}
	out := string(res.Stdout)
	if !strings.Contains(out, `http://allowed.test/hello 200 upstream saw allowed.test /hello auth="Bearer s3cret"`) {
		t.Errorf("the allowed host through the proxy, with its credential: %q", out)
	}
	if !strings.Contains(out, "http://denied.test/ 403") {
		t.Errorf("a host off the list: %q (want the proxy's 403)", out)
	}
	// The refusal is the command's violation, as on the other backends.
	if len(res.Violations) != 1 || !strings.Contains(res.Violations[0], `egress refused: GET "denied.test`) {
		t.Errorf("the command's violations: %q, want the refusal of denied.test", res.Violations)
	}
	if env := output(t, ctx, sess, sandbox.ExecRequest{Cmd: []string{"env"}}); strings.Contains(env, "s3cret") {
		t.Error("the credential is in the session's environment")
	}

	// Another process has no proxy for it.
	if _, err := c.Resume(ctx, sess.State()); !errors.Is(err, sandbox.ErrUnsupported) {
		t.Errorf("Resume of an allow-list session: %v, want ErrUnsupported", err)
	}

	api := apiServer(t, ctx, c)
	proxyAt := sess.(*session).egress.addr.String()
	if got := connects(t, ctx, sess, api); got[api] == "open" {
		t.Errorf("the allow-list session reaches the API server at %s", api)
	}
	// Another Pod reaches the listener (its Pod network is open) but
	// is not served.
	peer, err := c.Create(ctx, sandbox.Spec{Policy: sandbox.Policy{Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkHost}}})
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close(context.Background())
	res, err = sandbox.Exec(ctx, peer, sandbox.ExecRequest{
		Cmd: []string{"python3", "-c", fetchScript, "http://allowed.test/hello"},
		Env: map[string]string{"http_proxy": "http://" + proxyAt},
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(res.Stdout), " 200 ") {
		t.Errorf("another Pod used the session's proxy: %q", res.Stdout)
	}
}

// TestInspectedHTTPSFromAPod: for an inspected host the proxy terminates
// the Pod's TLS with the session's CA (which the Pod trusts), adds the
// bearer secret the session never holds, and applies the host's request
// rules.
func TestInspectedHTTPSFromAPod(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	upstream := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s auth=%q", r.Method, r.URL.Path, r.Header.Get("Authorization"))
	}))
	t.Cleanup(upstream.Close)
	t.Setenv("AGENTBOX_TEST_KUBE_SECRET", "sk-kube-7f3a")
	_, sess := allowListSession(t, ctx, upstream, "api.example.com:443", sandbox.NetworkPolicy{
		Allow:   []string{"api.example.com"},
		Rules:   []sandbox.RequestRule{{Host: "api.example.com", Methods: []string{"GET"}}},
		Secrets: []sandbox.Credential{{Host: "api.example.com", Kind: sandbox.CredBearer, Source: "env:AGENTBOX_TEST_KUBE_SECRET"}},
	})
	script := `import urllib.request, urllib.error
for m in ("GET", "POST"):
    try:
        r = urllib.request.urlopen(urllib.request.Request("https://api.example.com/v1/models", method=m, data=b"x" if m == "POST" else None), timeout=20)
        print(m, r.status, r.read().decode())
    except urllib.error.HTTPError as e:
        print(m, e.code)
`
	out := output(t, ctx, sess, sandbox.ExecRequest{Cmd: []string{"python3", "-c", script}})
	if !strings.Contains(out, `GET 200 GET /v1/models auth="Bearer sk-kube-7f3a"`) {
		t.Errorf("GET through the inspecting proxy, with the bearer: %q", out)
	}
	if !strings.Contains(out, "POST 403") {
		t.Errorf("a POST the host's rules do not admit: %q (want 403)", out)
	}
	if env := output(t, ctx, sess, sandbox.ExecRequest{Cmd: []string{"env"}}); strings.Contains(env, "sk-kube-7f3a") {
		t.Error("the secret is in the session's environment")
	}
}
