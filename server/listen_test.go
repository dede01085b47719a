package server

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestListenRules(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		o    ListenOptions
		err  string
	}{
		{"plain TCP on a public address", ListenOptions{Addr: "0.0.0.0:0"}, "--tls-cert"},
		{"a certificate without a key", ListenOptions{Addr: "127.0.0.1:0", CertFile: "c.pem"}, "both"},
		{"TLS on a unix socket", ListenOptions{Addr: "unix:" + filepath.Join(dir, "a.sock"), CertFile: "c", KeyFile: "k"}, "TCP address"},
		{"a relative address that is not host:port", ListenOptions{Addr: "sock"}, "unix:PATH"},
	} {
		t.Run(tc.name+" is refused", func(t *testing.T) {
			ln, err := Listen(tc.o)
			if err == nil {
				ln.Close()
				t.Fatal("listened")
			}
			if !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("err = %v, want it to say %q", err, tc.err)
			}
		})
	}
	t.Run("plain TCP on loopback, or anywhere with insecure, is served", func(t *testing.T) {
		for _, o := range []ListenOptions{{Addr: "127.0.0.1:0"}, {Addr: "[::1]:0"}, {Addr: "0.0.0.0:0", Insecure: true}} {
			ln, err := Listen(o)
			if err != nil {
				if strings.Contains(o.Addr, "::1") {
					continue // no IPv6 loopback on this host
				}
				t.Fatalf("%s: %v", o.Addr, err)
			}
			ln.Close()
		}
	})
	t.Run("a unix socket is mode 0660, a stale one is replaced, a live one and a file are not", func(t *testing.T) {
		sock := filepath.Join(dir, "s.sock")
		ln, err := Listen(ListenOptions{Addr: "unix:" + sock})
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(sock)
		if err != nil || fi.Mode().Perm() != 0o660 {
			t.Fatalf("socket mode %v, %v; want 0660", fi.Mode(), err)
		}
		if l2, err := Listen(ListenOptions{Addr: sock}); err == nil || !strings.Contains(err.Error(), "another server") {
			if l2 != nil {
				l2.Close()
			}
			t.Fatalf("a second server on a live socket: %v", err)
		}
		ln.(*net.UnixListener).SetUnlinkOnClose(false)
		ln.Close()
		ln, err = Listen(ListenOptions{Addr: sock})
		if err != nil {
			t.Fatalf("a stale socket was not replaced: %v", err)
		}
		ln.Close()
		file := filepath.Join(dir, "file")
		if err := os.WriteFile(file, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Listen(ListenOptions{Addr: file}); err == nil || !strings.Contains(err.Error(), "not a socket") {
			t.Fatalf("listening over a regular file: %v", err)
		}
	})
}
