package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// deniedError is a refusal decided while dialling (a listed name that
// resolves only to non-public addresses); it becomes a 403, not a 502.
type deniedError struct{ reason string }

func (e *deniedError) Error() string { return e.reason }

// dialUpstream is the forwarding Transport's dialer. The handler has
// already checked the allow-list; the address check happens here, on the
// addresses actually dialled.
func (p *Proxy) dialUpstream(ctx context.Context, network, addr string) (net.Conn, error) {
	t, err := parseTarget(addr, 0)
	if err != nil {
		return nil, fmt.Errorf("egress: dial %s: %w", addr, err)
	}
	// Re-check: the Transport dials what the rewritten request names, and
	// a bug there must not widen the allow-list or the name bounds.
	if _, err := p.admit(t); err != nil {
		return nil, &deniedError{reason: err.Error()}
	}
	return p.dial(ctx, t)
}

// dial connects to an allowed target. A name is resolved here and only
// its public addresses are dialled; an IP literal is dialled as listed.
func (p *Proxy) dial(ctx context.Context, t target) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.DialTimeout)
	defer cancel()
	if p.cfg.Dial != nil {
		return p.cfg.Dial(ctx, "tcp", t.String())
	}
	if t.ip.IsValid() {
		// Only an explicit IP-literal entry matches an IP-literal
		// request, so this address was listed on purpose.
		var d net.Dialer
		return d.DialContext(ctx, "tcp", t.String())
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", t.host)
	if err != nil {
		return nil, fmt.Errorf("egress: resolve %s: %w", t.host, err)
	}
	var public, rejected []netip.Addr
	for _, a := range addrs {
		if isPublic(a) {
			public = append(public, a.Unmap())
		} else {
			rejected = append(rejected, a)
		}
	}
	if len(public) == 0 {
		return nil, &deniedError{reason: fmt.Sprintf("%s resolves only to non-public addresses (%s); list an IP literal to allow one explicitly", t.host, joinAddrs(rejected))}
	}
	var errs []error
	for _, a := range public {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(a.String(), strconv.Itoa(t.port)))
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("egress: connect %s: %w", t, errors.Join(errs...))
}

func joinAddrs(as []netip.Addr) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = a.String()
	}
	return strings.Join(s, ", ")
}
