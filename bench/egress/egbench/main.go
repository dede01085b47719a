// Command egbench measures what TLS inspection at the egress proxy costs
// against the CONNECT tunnel it replaces, in one run, the two sides
// interleaved round by round so that load drifts hit both alike:
//
//   - latency of a small HTTPS GET once connected (keep-alive, warm-up
//     rounds dropped): p50 and p95 inspected vs tunnelled;
//   - throughput of a large download (100 MiB by default), median of the
//     rounds, inspected vs tunnelled.
//
// The upstream is a loopback HTTPS server, the proxy is sandbox/egress as
// the backends run it, and the client is a Go HTTP client in the same
// process (the sandbox's side of the proxy). It prints a Markdown table.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/agentbox/agentbox/sandbox/egress"
)

func main() {
	n := flag.Int("n", 2000, "small requests per side")
	warm := flag.Int("warm", 100, "warm-up requests per side, dropped")
	size := flag.Int64("size", 100<<20, "download size in bytes")
	rounds := flag.Int("rounds", 5, "downloads per side")
	h2 := flag.Bool("h2", false, "speak HTTP/2 to the proxy on the inspected side")
	flag.Parse()
	if err := run(*n, *warm, *size, *rounds, *h2); err != nil {
		fmt.Fprintln(os.Stderr, "egbench:", err)
		os.Exit(1)
	}
}

func run(n, warm int, size int64, rounds int, h2 bool) error {
	chunk := make([]byte, 256<<10)
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/big" {
			_, _ = io.WriteString(w, "ok")
			return
		}
		w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
		for left := size; left > 0; {
			k := min(left, int64(len(chunk)))
			if _, err := w.Write(chunk[:k]); err != nil {
				return
			}
			left -= k
		}
	}))
	up.EnableHTTP2 = true
	up.StartTLS()
	defer up.Close()
	roots := x509.NewCertPool()
	roots.AddCert(up.Certificate())

	p, err := egress.New(egress.Config{
		Allow:         []string{"inspected.example.com", "tunnelled.example.com"},
		Inspect:       []string{"inspected.example.com"},
		UpstreamRoots: roots,
		Logger:        slog.New(slog.DiscardHandler),
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, up.Listener.Addr().String())
		},
	})
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() { _ = p.Serve(l) }()
	defer p.Close()
	proxyURL, _ := url.Parse("http://" + l.Addr().String())

	ca := x509.NewCertPool()
	ca.AppendCertsFromPEM(p.CACert())
	client := func(pool *x509.CertPool, http2 bool) *http.Client {
		return &http.Client{Transport: &http.Transport{
			Proxy: http.ProxyURL(proxyURL), TLSClientConfig: &tls.Config{RootCAs: pool},
			ForceAttemptHTTP2: http2, MaxIdleConnsPerHost: 4,
		}}
	}
	sides := []struct {
		name string
		c    *http.Client
		url  string
	}{
		{"tunnelled", client(roots, false), "https://tunnelled.example.com"},
		{"inspected", client(ca, h2), "https://inspected.example.com"},
	}
	get := func(c *http.Client, u string) (int64, error) {
		resp, err := c.Get(u)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			return 0, fmt.Errorf("GET %s: %s", u, resp.Status)
		}
		return io.Copy(io.Discard, resp.Body)
	}

	lat := make([][]time.Duration, len(sides))
	for i := 0; i < warm+n; i++ {
		for s, side := range sides {
			t0 := time.Now()
			if _, err := get(side.c, side.url+"/small"); err != nil {
				return err
			}
			if i >= warm {
				lat[s] = append(lat[s], time.Since(t0))
			}
		}
	}
	thr := make([][]float64, len(sides))
	for r := 0; r < rounds; r++ {
		for s, side := range sides {
			t0 := time.Now()
			got, err := get(side.c, side.url+"/big")
			if err != nil {
				return err
			}
			if got != size {
				return fmt.Errorf("%s: downloaded %d bytes, want %d", side.name, got, size)
			}
			thr[s] = append(thr[s], float64(size)/(1<<20)/time.Since(t0).Seconds())
		}
	}

	proto := "HTTP/1.1"
	if h2 {
		proto = "HTTP/2"
	}
	fmt.Printf("| measurement | tunnelled | inspected (%s to the proxy) | difference |\n|---|---|---|---|\n", proto)
	for _, q := range []float64{0.50, 0.95} {
		a, b := quantile(lat[0], q), quantile(lat[1], q)
		fmt.Printf("| small GET once connected, p%d (N=%d) | %s | %s | %+.3f ms |\n", int(q*100), n, ms(a), ms(b), float64(b-a)/1e6)
	}
	a, b := median(thr[0]), median(thr[1])
	fmt.Printf("| %d MiB download, median of %d | %.0f MiB/s | %.0f MiB/s | %.0f%% |\n", size>>20, rounds, a, b, (b/a-1)*100)
	return nil
}

func quantile(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/1e6) }
