package sandboxtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/sandbox"
)

func portTests() []testCase {
	return []testCase{
		{name: "an exposed port reaches a server in the sandbox and nothing else does", run: testPorts},
		{name: "a spec with a bad port list is refused", run: testBadPorts},
	}
}

// servePorts starts a python3 HTTP server in the session on each port,
// serving the workspace, and waits until the first answers.
func servePorts(t *testing.T, sess sandbox.Session, ports ...int) {
	t.Helper()
	var script strings.Builder
	script.WriteString("import http.server, socketserver, threading\n")
	script.WriteString("class S(socketserver.ThreadingMixIn, http.server.HTTPServer): daemon_threads = True\n")
	for _, p := range ports {
		fmt.Fprintf(&script, "threading.Thread(target=S(('127.0.0.1', %d), http.server.SimpleHTTPRequestHandler).serve_forever).start()\n", p)
	}
	p, err := sess.Start(ctx(t), sandbox.ExecRequest{Cmd: []string{"python3", "-c", script.String()}})
	if err != nil {
		t.Fatal(err)
	}
	// The server logs each request to stderr: read and drop it, as a
	// backend that delivers output as it is read (remote) holds the
	// process back behind unread output, as a pipe would.
	for _, r := range []io.Reader{p.Stdout(), p.Stderr()} {
		if r != nil {
			go func() { _, _ = io.Copy(io.Discard, r) }()
		}
	}
	t.Cleanup(func() { _ = p.Kill(context.Background()); _ = p.Close() })
}

// get fetches path over conn with HTTP/1.0 and returns the status line
// and the body.
func get(t *testing.T, conn net.Conn, path string) (status, body string) {
	t.Helper()
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.0\r\nHost: sandbox\r\n\r\n", path); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	status, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("read the status line: %v", err)
	}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("read the headers: %v", err)
		}
		if line == "\r\n" {
			break
		}
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("read the body: %v", err)
	}
	return strings.TrimSpace(status), string(b)
}

func testPorts(t *testing.T, s *suite) {
	// Three ports in a range nothing else on the host uses by habit:
	// exposed and served, exposed and idle, served and not exposed.
	base := 20000 + rand.IntN(20000)
	served, idle, hidden := base, base+1, base+2
	c, sess := s.session(t, func(sp *sandbox.Spec) { sp.Ports = []int{served, idle} })
	if got := sess.State().Spec.Ports; !slices.Equal(got, []int{served, idle}) {
		t.Errorf("State().Spec.Ports = %v, want [%d %d]", got, served, idle)
	}
	if why, ok := s.cfg.skips[CapPorts]; ok {
		if _, err := sandbox.DialPort(ctx(t), sess, served); !errors.Is(err, sandbox.ErrUnsupported) {
			t.Fatalf("DialPort where the backend cannot reach ports (%s): err = %v, want ErrUnsupported", why, err)
		}
		return
	}
	if err := sess.WriteFile(ctx(t), "hello.txt", []byte("hello from inside\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	servePorts(t, sess, served, hidden)

	var conn net.Conn
	deadline := time.Now().Add(15 * time.Second)
	for {
		var err error
		conn, err = sandbox.DialPort(ctx(t), sess, served)
		if err == nil {
			break
		}
		if !errors.Is(err, sandbox.ErrNotFound) || time.Now().After(deadline) {
			t.Fatalf("DialPort(%d) with a server starting on it: %v", served, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	status, body := get(t, conn, "/hello.txt")
	if !strings.Contains(status, " 200 ") || body != "hello from inside\n" {
		t.Fatalf("GET /hello.txt through port %d: %q, body %q", served, status, body)
	}
	// Several connections at once, each its own.
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			conn, err := sandbox.DialPort(ctx(t), sess, served)
			if err != nil {
				errs <- err
				return
			}
			_, body := get(t, conn, "/hello.txt")
			if body != "hello from inside\n" {
				err = fmt.Errorf("body %q", body)
			}
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Errorf("a concurrent connection: %v", err)
		}
	}

	if _, err := sandbox.DialPort(ctx(t), sess, idle); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("DialPort(%d), exposed with nothing listening: err = %v, want ErrNotFound", idle, err)
	}
	if conn, err := sandbox.DialPort(ctx(t), sess, hidden); !errors.Is(err, sandbox.ErrInvalid) {
		if conn != nil {
			conn.Close()
		}
		t.Errorf("DialPort(%d), served but not exposed: err = %v, want ErrInvalid", hidden, err)
	}
	// A backend with a network of its own shows the sandbox's ports to
	// nobody on the host: only DialPort reaches them.
	if slices.Contains(c.Enforces(), sandbox.PartNetworkNone) {
		for _, p := range []int{served, hidden} {
			if conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), time.Second); err == nil {
				conn.Close()
				t.Errorf("the host's 127.0.0.1:%d answers: the sandbox's port is open on the host", p)
			}
		}
	}
}

func testBadPorts(t *testing.T, s *suite) {
	c := s.client(t)
	for _, ports := range [][]int{{0}, {65536}, {-1}, {8000, 8000}} {
		sess, err := c.Create(ctx(t), s.spec(t, func(sp *sandbox.Spec) { sp.Ports = ports }))
		if err == nil {
			closeAtEnd(t, sess)
		}
		if !errors.Is(err, sandbox.ErrInvalid) {
			t.Errorf("Create with ports %v: err = %v, want ErrInvalid", ports, err)
		}
	}
}
