package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentbox/agentbox/sandbox"
)

// Config configures a Proxy.
type Config struct {
	// Allow is the allow-list; see the package documentation for the
	// entry syntax. It must not be empty.
	Allow []string
	// Credentials maps an allow-list entry (or a host it admits) to
	// headers added to plain-HTTP requests for that host, replacing any
	// the sandbox sent. They are never logged or sent back.
	Credentials map[string]map[string]string
	// Inspect lists allow-list entries (or hosts they admit) whose HTTPS
	// the proxy terminates with its session CA; hosts of Rules and
	// Secrets are inspected too. Other allowed hosts are tunnelled.
	Inspect []string
	// Rules admit requests to inspected (and plain-HTTP) hosts by method
	// and path; see sandbox.RequestRule.
	Rules []sandbox.RequestRule
	// Secrets are credentials New reads from their sources and adds to
	// requests; their values never leave the proxy.
	Secrets []sandbox.Credential
	// UpstreamRoots verifies inspected hosts' certificates; nil: the
	// host's system roots. Tests put their own root here.
	UpstreamRoots *x509.CertPool
	// Logger receives one warning per refusal; default slog.Default().
	Logger *slog.Logger
	// DialTimeout bounds resolving and connecting upstream, and reading a
	// client's request header; default 10s.
	DialTimeout time.Duration
	// IdleTimeout closes a CONNECT tunnel or keep-alive connection with no
	// traffic for this long; default 2 minutes.
	IdleTimeout time.Duration
	// MaxConns bounds concurrent client connections; further ones wait
	// to be accepted. Default 256.
	MaxConns int
	// MaxHeaderBytes bounds a request's header; default 64 KiB.
	MaxHeaderBytes int
	// Names bounds the names wildcard entries admit; see NameLimits.
	Names NameLimits
	// Dial, when set, replaces resolution and dialling: it gets the
	// listed "host:port" as requested, and the proxy does not check the
	// addresses it reaches. For tests.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Upstream is how a proxy reaches and verifies upstreams, for a backend's
// tests that play a remote host on loopback: Dial and Roots go to
// Config.Dial and Config.UpstreamRoots. The zero Upstream is the real
// network and the system roots.
type Upstream struct {
	Dial  func(ctx context.Context, network, addr string) (net.Conn, error)
	Roots *x509.CertPool
}

// Defaults for the zero Config fields.
const (
	DefaultDialTimeout    = 10 * time.Second
	DefaultIdleTimeout    = 2 * time.Minute
	DefaultMaxConns       = 256
	DefaultMaxHeaderBytes = 64 << 10
	// maxDenials bounds the refusals kept in memory; older ones are
	// dropped (they were logged).
	maxDenials = 1000
)

// Proxy is an allow-list HTTP proxy. Its methods are safe for concurrent use.
type Proxy struct {
	cfg     Config
	allow   allowList
	creds   []credential
	names   *nameGate
	log     *slog.Logger
	server  *http.Server
	forward *httputil.ReverseProxy
	tr      *http.Transport

	// Inspection: the session CA, the hosts it applies to, the request
	// rules and the resolved secrets, and the HTTPS forwarder.
	ca              *authority
	inspect         []pattern
	rules           []ruleGroup
	secrets         []secret
	hasPlaceholders bool
	mitm            *httputil.ReverseProxy
	upTr            *http.Transport

	// base is every request's parent context; Close cancels it, which
	// ends dials in progress and protocol-switched (Upgrade) connections.
	base       context.Context
	cancelBase context.CancelFunc

	mu      sync.Mutex
	closed  bool
	done    chan struct{}
	tunnels map[net.Conn]struct{}
	denials []Denial // the latest maxDenials
	refused uint64   // every refusal so far
}

// credential is the headers injected for hosts matching pattern.
type credential struct {
	pattern pattern
	headers http.Header
}

// New validates cfg and returns a Proxy ready to Serve.
func New(cfg Config) (*Proxy, error) {
	if len(cfg.Allow) == 0 {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "egress: the allow-list is empty")
	}
	p := &Proxy{cfg: cfg, log: cfg.Logger, done: make(chan struct{}), tunnels: map[net.Conn]struct{}{}}
	if p.log == nil {
		p.log = slog.Default()
	}
	if p.cfg.DialTimeout <= 0 {
		p.cfg.DialTimeout = DefaultDialTimeout
	}
	if p.cfg.IdleTimeout <= 0 {
		p.cfg.IdleTimeout = DefaultIdleTimeout
	}
	if p.cfg.MaxConns <= 0 {
		p.cfg.MaxConns = DefaultMaxConns
	}
	if p.cfg.MaxHeaderBytes <= 0 {
		p.cfg.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	for _, e := range cfg.Allow {
		pat, err := parsePattern(e)
		if err != nil {
			return nil, err
		}
		p.allow = append(p.allow, pat)
	}
	p.names = newNameGate(cfg.Names, time.Now)
	creds, err := p.parseCredentials(cfg.Credentials)
	if err != nil {
		return nil, err
	}
	p.creds = creds

	p.tr = &http.Transport{
		Proxy:                  nil, // never chain to the host's own proxy settings
		DialContext:            p.dialUpstream,
		MaxIdleConns:           64,
		IdleConnTimeout:        p.cfg.IdleTimeout,
		TLSHandshakeTimeout:    p.cfg.DialTimeout,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: int64(p.cfg.MaxHeaderBytes) * 4,
	}
	p.forward = p.reverseProxy(p.rewriteTo("http", 80), p.tr)
	if err := p.setupInspection(cfg); err != nil {
		return nil, err
	}
	p.base, p.cancelBase = context.WithCancel(context.Background())
	p.server = &http.Server{
		Handler:           p,
		BaseContext:       func(net.Listener) context.Context { return p.base },
		ReadHeaderTimeout: p.cfg.DialTimeout,
		IdleTimeout:       p.cfg.IdleTimeout,
		MaxHeaderBytes:    p.cfg.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(p.log.Handler(), slog.LevelWarn),
	}
	return p, nil
}

// parseCredentials checks that every credentials key is admitted by the
// allow-list, so a typo does not silently send nothing.
func (p *Proxy) parseCredentials(m map[string]map[string]string) ([]credential, error) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var out []credential
	for _, k := range keys {
		pat, err := parsePattern(k)
		if err != nil {
			return nil, sandbox.Errorf(sandbox.ErrInvalid, "egress: credentials key: %v", err)
		}
		if !p.covers(pat) {
			return nil, sandbox.Errorf(sandbox.ErrInvalid, "egress: credentials for %q, which the allow-list does not admit", k)
		}
		h := http.Header{}
		for name, v := range m[k] {
			if name == "" || strings.ContainsAny(name, " :\r\n") || strings.ContainsAny(v, "\r\n") {
				return nil, sandbox.Errorf(sandbox.ErrInvalid, "egress: credentials for %q: bad header %q", k, name)
			}
			h.Set(name, v)
		}
		out = append(out, credential{pattern: pat, headers: h})
	}
	// Exact names after wildcards, so the more specific one wins.
	slices.SortStableFunc(out, func(a, b credential) int {
		switch {
		case a.pattern.wildcard == b.pattern.wildcard:
			return 0
		case a.pattern.wildcard:
			return -1
		}
		return 1
	})
	return out, nil
}

// covers reports whether a credentials key names something allowed.
func (p *Proxy) covers(key pattern) bool {
	for _, a := range p.allow {
		if strings.EqualFold(a.raw, key.raw) {
			return true
		}
	}
	if key.wildcard {
		return false
	}
	t := target{host: key.host, ip: key.ip, port: key.port}
	if t.ip.IsValid() {
		t.host = t.ip.String()
	}
	for _, port := range []int{key.port, 80, 443} {
		if key.port != 0 && port != key.port || port == 0 {
			continue
		}
		t.port = port
		if p.allow.check(t) == nil {
			return true
		}
	}
	return false
}

// Serve accepts client connections on l until Close; it returns nil after
// Close and the accept error otherwise. It may be called for several
// listeners.
func (p *Proxy) Serve(l net.Listener) error {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		_ = l.Close()
		return nil
	}
	err := p.server.Serve(newLimitListener(l, p.cfg.MaxConns, p.done))
	if errors.Is(err, http.ErrServerClosed) || errors.Is(err, net.ErrClosed) && p.isClosed() {
		return nil
	}
	if err != nil {
		return fmt.Errorf("egress: serve %s: %w", l.Addr(), err)
	}
	return nil
}

func (p *Proxy) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// Close stops every Serve, closes the listeners, open connections and
// tunnels. It is idempotent.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.done)
	tunnels := make([]net.Conn, 0, len(p.tunnels))
	for c := range p.tunnels {
		tunnels = append(tunnels, c)
	}
	p.mu.Unlock()

	p.cancelBase()
	err := p.server.Close()
	for _, c := range tunnels {
		_ = c.Close()
	}
	p.tr.CloseIdleConnections()
	p.upTr.CloseIdleConnections()
	if err != nil {
		return fmt.Errorf("egress: close: %w", err)
	}
	return nil
}

// admit checks t against the allow-list and, when only a wildcard entry
// admits its name, against the name bounds. It returns the status and
// reason of a refusal, or 0 and nil.
func (p *Proxy) admit(t target) (int, error) {
	// A placeholder in a name would go out through DNS, or through a
	// tunnel the proxy cannot read; whatever the name, it is refused.
	for i := range p.secrets {
		if s := &p.secrets[i]; s.placeholder != "" && strings.Contains(t.host, s.placeholder) {
			return http.StatusForbidden, errors.New(exfiltration(s, t))
		}
	}
	if err := p.allow.check(t); err != nil {
		return http.StatusForbidden, err
	}
	if w, ok := p.allow.wildcardOnly(t); ok {
		return p.names.admit(t.host, w)
	}
	return 0, nil
}

// ServeHTTP dispatches a client request: CONNECT is tunnelled, absolute
// http:// URIs are forwarded, anything else is refused.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodConnect:
		p.serveConnect(w, r)
	case r.URL.IsAbs() && r.URL.Host != "":
		p.serveForward(w, r)
	default:
		p.refuse(w, r, r.Host, http.StatusBadRequest,
			"not a proxy request: send CONNECT host:port, or an absolute http:// URI")
	}
}

// setupInspection parses what the proxy inspects, reads the secrets and,
// when any host is inspected, makes the session CA and the HTTPS
// forwarder (which the zero config also gets, idle, so Close is uniform).
func (p *Proxy) setupInspection(cfg Config) error {
	rules, err := p.parseRules(cfg.Rules)
	if err != nil {
		return err
	}
	p.rules = rules
	if p.secrets, err = p.resolveSecrets(cfg.Secrets); err != nil {
		return err
	}
	hosts := slices.Clone(cfg.Inspect)
	for _, r := range cfg.Rules {
		hosts = append(hosts, r.Host)
	}
	for _, s := range p.secrets {
		hosts = append(hosts, s.Host)
		p.hasPlaceholders = p.hasPlaceholders || s.placeholder != ""
	}
	for _, h := range hosts {
		pat, err := parsePattern(h)
		if err != nil {
			return err
		}
		if !p.covers(pat) {
			return sandbox.Errorf(sandbox.ErrInvalid, "egress: %q is inspected but the allow-list does not admit it", h)
		}
		p.inspect = append(p.inspect, pat)
	}
	if len(p.inspect) > 0 {
		if p.ca, err = newAuthority(time.Now()); err != nil {
			return err
		}
	}
	// Inspected hosts: the same limits, over TLS verified against the
	// host's roots (or the test's), HTTP/2 where the upstream offers it.
	p.upTr = p.tr.Clone()
	p.upTr.TLSClientConfig = &tls.Config{RootCAs: cfg.UpstreamRoots, MinVersion: tls.VersionTLS12}
	p.upTr.ForceAttemptHTTP2 = true
	p.mitm = p.reverseProxy(p.rewriteTo("https", 443), p.upTr)
	return nil
}

// CACert is the PEM certificate of the session CA the sandbox must trust,
// or nil when no host is inspected. Its key never leaves this process.
func (p *Proxy) CACert() []byte {
	if p.ca == nil {
		return nil
	}
	return slices.Clone(p.ca.certPEM)
}

// TrustEnv are the environment variables that point TLS clients at a
// bundle file (OpenSSL and Go, Python requests, Node, git, curl); a
// backend sets each to the file holding the system roots and CACert.
var TrustEnv = []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "GIT_SSL_CAINFO", "CURL_CA_BUNDLE"}
