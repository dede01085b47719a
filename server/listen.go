package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// ListenOptions say where the server listens.
type ListenOptions struct {
	// Addr is a unix socket ("unix:/run/agentbox/serve.sock", or an
	// absolute path) or a TCP address ("host:port").
	Addr string
	// CertFile and KeyFile turn on TLS for a TCP address.
	CertFile, KeyFile string
	// Insecure allows plain TCP on an address other than loopback.
	Insecure bool
}

// DefaultSocket is where the server listens by default.
const DefaultSocket = "/run/agentbox/serve.sock"

// Listen opens the listener o describes. The rules: a unix socket is
// made mode 0660 in a directory made 0750 if missing (its file modes are
// the access control before the keys); plain TCP is served only on
// loopback, or with Insecure, which the caller must warn about; TLS needs
// both a certificate and a key.
func Listen(o ListenOptions) (net.Listener, error) {
	addr := o.Addr
	if addr == "" {
		addr = "unix:" + DefaultSocket
	}
	if path, ok := unixPath(addr); ok {
		if o.CertFile != "" || o.KeyFile != "" {
			return nil, errors.New("listen: TLS is for a TCP address; a unix socket is guarded by its file mode")
		}
		return listenUnix(path)
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("listen %q: want unix:PATH, an absolute socket path or HOST:PORT: %w", addr, err)
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		return nil, errors.New("listen: TLS needs both --tls-cert and --tls-key")
	}
	if o.CertFile == "" && !o.Insecure && !loopback(host) {
		return nil, fmt.Errorf("listen %s: plain TCP on an address other than loopback sends API keys in the clear; give --tls-cert and --tls-key, or --insecure behind a TLS-terminating proxy", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	if o.CertFile == "" {
		return ln, nil
	}
	cert, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("listen %s: TLS certificate: %w", addr, err)
	}
	return tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}), nil
}

// unixPath is the socket path of a unix address.
func unixPath(addr string) (string, bool) {
	if p, ok := strings.CutPrefix(addr, "unix://"); ok {
		return p, true
	}
	if p, ok := strings.CutPrefix(addr, "unix:"); ok {
		return p, true
	}
	return addr, filepath.IsAbs(addr)
}

// loopback reports whether host names only loopback addresses.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// listenUnix listens on path, replacing a stale socket (one nobody
// listens on) but never another kind of file or a live server's socket.
func listenUnix(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("listen %s: a %s is there, not a socket; remove it or choose another path", path, fi.Mode().Type())
		}
		if c, err := net.Dial("unix", path); err == nil {
			c.Close()
			return nil, fmt.Errorf("listen %s: another server is listening there", path)
		} else if !errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("listen %s: probe the existing socket: %w", path, err)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("listen %s: remove the stale socket: %w", path, err)
		}
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o660); err != nil {
		ln.Close()
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	return ln, nil
}
