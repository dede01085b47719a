package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/textproto"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

func init() {
	// connect dials a TCP address and prints what the peer sends first.
	register("connect", func(a []string) error {
		need(a, 1, "connect HOST:PORT")
		return dialAndRead("tcp", a[0])
	})
	// connect-udp sends a DNS-sized datagram: exfiltration over UDP
	// needs only a route.
	register("connect-udp", func(a []string) error {
		need(a, 1, "connect-udp HOST:PORT")
		c, err := net.DialTimeout("udp", a[0], 2*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write(make([]byte, 32))
		return err
	})
	register("connect-unix", func(a []string) error {
		need(a, 1, "connect-unix PATH|@ABSTRACT")
		return dialAndRead("unix", a[0])
	})
	// serve listens on a TCP address and greets every client with TEXT.
	register("serve", func(a []string) error {
		need(a, 2, "serve HOST:PORT TEXT")
		ln, err := net.Listen("tcp", a[0])
		if err != nil {
			return err
		}
		fmt.Println("listening")
		for {
			c, err := ln.Accept()
			if err != nil {
				return err
			}
			fmt.Fprintln(c, a[1])
			c.Close()
		}
	})
	// proxy-connect asks the HTTPS_PROXY for a tunnel to HOST:PORT.
	register("proxy-connect", func(a []string) error {
		need(a, 1, "proxy-connect HOST:PORT")
		return proxyRequest(fmt.Sprintf("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", a[0], a[0]))
	})
	// proxy-get sends a plain-HTTP request for URL to the HTTP_PROXY, with
	// HOST as the Host header (default the URL's).
	register("proxy-get", func(a []string) error {
		need(a, 1, "proxy-get URL [HOST]")
		u, err := url.Parse(a[0])
		if err != nil {
			return err
		}
		host := u.Host
		if len(a) > 1 {
			host = a[1]
		}
		return proxyRequest(fmt.Sprintf("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", a[0], host))
	})
}

func dialAndRead(network, addr string) error {
	c, err := net.DialTimeout(network, addr, 2*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	b, _ := io.ReadAll(io.LimitReader(c, 4096))
	fmt.Printf("received: %q\n", b)
	return nil
}

// proxyRequest sends req to the proxy named by HTTPS_PROXY and prints
// the status code of its answer. Any answer but 200 is the proxy's
// refusal (EACCES stands for it in the result line).
func proxyRequest(req string) error {
	p := os.Getenv("HTTPS_PROXY")
	if p == "" {
		return fmt.Errorf("HTTPS_PROXY is not set")
	}
	u, err := url.Parse(p)
	if err != nil {
		return err
	}
	c, err := net.DialTimeout("tcp", u.Host, 2*time.Second)
	if err != nil {
		return fmt.Errorf("dial the proxy %s: %w", u.Host, err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(15 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		return err
	}
	// A hand-read answer (net/http would make the helper slow to build).
	tp := textproto.NewReader(bufio.NewReader(c))
	line, err := tp.ReadLine()
	if err != nil {
		return fmt.Errorf("read the proxy's answer: %w", err)
	}
	f := strings.Fields(line)
	if len(f) < 2 {
		return fmt.Errorf("malformed status line %q", line)
	}
	fmt.Printf("status: %s\n", f[1])
	if f[1] == "200" && strings.HasPrefix(req, "CONNECT ") {
		return nil // a tunnel: nothing more to read
	}
	hdr, _ := tp.ReadMIMEHeader()
	// The rest: headers and (some) body. A refusal may keep the
	// connection open, so the body is read by its length.
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	n, _ := strconv.Atoi(hdr.Get("Content-Length"))
	body := make([]byte, min(n, 8192))
	_, _ = io.ReadFull(tp.R, body)
	fmt.Printf("response headers: %q\nresponse body: %q\n", hdr, body)
	if f[1] == "200" {
		return nil
	}
	return fmt.Errorf("proxy answered %s", f[1])
}
