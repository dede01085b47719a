package linux

import (
	"context"
	"errors"
	"io"
	"net"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/sandbox"
)

// echoScript is a python3 server on 127.0.0.1:PORT that answers each
// byte it reads with the same byte, and sends 64 MiB to a connection
// whose first byte is "b" (bulk).
const echoScript = `
import socket, sys, threading
def serve(c):
    with c:
        while True:
            b = c.recv(1)
            if not b: return
            if b == b"b":
                chunk = bytes(1 << 20)
                for _ in range(64): c.sendall(chunk)
                return
            c.sendall(b)
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(64)
while True:
    c, _ = s.accept(); threading.Thread(target=serve, args=(c,), daemon=True).start()
`

// BenchmarkPort compares an exposed port reached with DialPort against
// the same python3 server on the host's own loopback: the cost of a
// connection (dial plus one byte there and back) and the throughput of
// 64 MiB read through it.
func BenchmarkPort(b *testing.B) {
	const port = 28431
	c := newTestClient(b)
	s := newTestSession(b, c, sandbox.Spec{Ports: []int{port}})
	p, err := s.Start(context.Background(), sandbox.ExecRequest{Cmd: []string{"python3", "-c", echoScript, strconv.Itoa(port)}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Kill(context.Background()); _ = p.Close() })
	// The same server on the host, on the next port.
	host := startHostEcho(b, port+1)
	defer host()

	dialers := []struct {
		name string
		dial func() (net.Conn, error)
	}{
		{"host-loopback", func() (net.Conn, error) { return net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+1))) }},
		{"DialPort", func() (net.Conn, error) { return sandbox.DialPort(context.Background(), s, port) }},
	}
	for _, d := range dialers {
		waitDial(b, d.dial)
	}
	for _, d := range dialers {
		b.Run("connect+roundtrip/"+d.name, func(b *testing.B) {
			var samples []time.Duration
			buf := make([]byte, 1)
			for b.Loop() {
				t := time.Now()
				conn, err := d.dial()
				if err != nil {
					b.Fatal(err)
				}
				if _, err := conn.Write([]byte("x")); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(conn, buf); err != nil {
					b.Fatal(err)
				}
				conn.Close()
				samples = append(samples, time.Since(t))
			}
			reportP50(b, samples)
		})
	}
	for _, d := range dialers {
		b.Run("read64MiB/"+d.name, func(b *testing.B) {
			b.SetBytes(64 << 20)
			for b.Loop() {
				conn, err := d.dial()
				if err != nil {
					b.Fatal(err)
				}
				if _, err := conn.Write([]byte("b")); err != nil {
					b.Fatal(err)
				}
				n, err := io.Copy(io.Discard, conn)
				conn.Close()
				if err != nil || n != 64<<20 {
					b.Fatalf("read %d bytes: %v", n, err)
				}
			}
		})
	}
}

func waitDial(b *testing.B, dial func() (net.Conn, error)) {
	deadline := time.Now().Add(15 * time.Second)
	for {
		conn, err := dial()
		if err == nil {
			conn.Close()
			return
		}
		if time.Now().After(deadline) || (!errors.Is(err, sandbox.ErrNotFound) && !isRefused(err)) {
			b.Fatalf("the echo server never answered: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func isRefused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

// startHostEcho runs echoScript on the host's loopback and returns its
// stop.
func startHostEcho(b *testing.B, port int) func() {
	cmd := exec.Command("python3", "-c", echoScript, strconv.Itoa(port))
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	return func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
}
