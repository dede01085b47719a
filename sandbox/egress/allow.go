package egress

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/agentbox/agentbox/sandbox"
)

// pattern is one parsed allow-list (or credentials) entry.
type pattern struct {
	raw string
	// host is the lower-case name without "*." (empty for IP literals).
	host     string
	wildcard bool
	// ip is set for IP-literal entries.
	ip netip.Addr
	// port is the only port allowed; 0 means 80 and 443.
	port int
}

// parsePattern parses and validates one entry.
func parsePattern(entry string) (pattern, error) {
	p := pattern{raw: entry}
	if strings.TrimSpace(entry) != entry {
		return p, sandbox.Errorf(sandbox.ErrInvalid, "egress: allow-list entry %q has surrounding spaces", entry)
	}
	s := strings.ToLower(entry)
	// Bracketed IPv6 literal, with or without a port.
	if strings.HasPrefix(s, "[") {
		host, port, err := splitOptionalPort(s)
		if err != nil {
			return p, sandbox.Errorf(sandbox.ErrInvalid, "egress: allow-list entry %q: %v", entry, err)
		}
		ip, err := netip.ParseAddr(host)
		if err != nil || ip.Zone() != "" {
			return p, sandbox.Errorf(sandbox.ErrInvalid, "egress: allow-list entry %q is not an IPv6 literal", entry)
		}
		p.ip, p.port = ip.Unmap(), port
		return p, nil
	}
	if err := sandbox.ValidateHostPattern(s); err != nil {
		return p, err
	}
	if rest, ok := strings.CutPrefix(s, "*."); ok {
		p.wildcard = true
		s = rest
	}
	host, port, err := splitOptionalPort(s)
	if err != nil {
		return p, sandbox.Errorf(sandbox.ErrInvalid, "egress: allow-list entry %q: %v", entry, err)
	}
	p.port = port
	if ip, err := netip.ParseAddr(host); err == nil {
		if p.wildcard {
			return p, sandbox.Errorf(sandbox.ErrInvalid, "egress: allow-list entry %q puts a wildcard on an IP address", entry)
		}
		p.ip = ip.Unmap()
		return p, nil
	}
	if strings.Trim(strings.ReplaceAll(host, ".", ""), "0123456789") == "" {
		// All digits and dots but not an IPv4 address (e.g. "1.2.3"):
		// resolvers read such names as numeric addresses in odd ways.
		return p, sandbox.Errorf(sandbox.ErrInvalid, "egress: allow-list entry %q is neither an IP address nor a host name", entry)
	}
	p.host = host
	return p, nil
}

// splitOptionalPort splits "host[:port]" or "[v6][:port]".
func splitOptionalPort(s string) (string, int, error) {
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", 0, fmt.Errorf("unclosed '['")
		}
		host, rest := s[1:end], s[end+1:]
		if rest == "" {
			return host, 0, nil
		}
		if !strings.HasPrefix(rest, ":") {
			return "", 0, fmt.Errorf("junk after ']'")
		}
		port, err := parsePort(rest[1:])
		return host, port, err
	}
	host, portStr, found := strings.Cut(s, ":")
	if !found {
		return host, 0, nil
	}
	port, err := parsePort(portStr)
	return host, port, err
}

func parsePort(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 || strings.Trim(s, "0123456789") != "" {
		return 0, fmt.Errorf("bad port %q", s)
	}
	return n, nil
}

// target is the destination a request asks for, normalised.
type target struct {
	// host is the lower-case name without a trailing dot, or the IP
	// literal's string form.
	host string
	// ip is set when the request names an IP literal.
	ip   netip.Addr
	port int
}

// String is host:port, bracketing IPv6.
func (t target) String() string { return net.JoinHostPort(t.host, strconv.Itoa(t.port)) }

// hostForURL is the host as it goes in a URL without a port.
func (t target) hostForURL() string {
	if t.ip.Is6() {
		return "[" + t.host + "]"
	}
	return t.host
}

// parseTarget normalises a request's host and port. defaultPort applies
// when hostport has none (0: a port is required).
func parseTarget(hostport string, defaultPort int) (target, error) {
	var t target
	host, portStr, err := net.SplitHostPort(hostport)
	if err != nil {
		if defaultPort == 0 {
			return t, fmt.Errorf("%q has no port", hostport)
		}
		host, portStr = strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]"), strconv.Itoa(defaultPort)
	}
	port, err := parsePort(portStr)
	if err != nil {
		return t, err
	}
	t.port = port
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.Zone() != "" {
			return t, fmt.Errorf("%q has an IPv6 zone", hostport)
		}
		t.ip = ip.Unmap()
		t.host = t.ip.String()
		return t, nil
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if err := sandbox.ValidateHostPattern(host); err != nil || strings.HasPrefix(host, "*") {
		return t, fmt.Errorf("%q is not a host name", host)
	}
	if strings.Trim(strings.ReplaceAll(host, ".", ""), "0123456789") == "" {
		return t, fmt.Errorf("%q is neither an IP address nor a host name", host)
	}
	t.host = host
	return t, nil
}

// matchesHost reports whether p names t's host, whatever the port.
func (p pattern) matchesHost(t target) bool {
	if p.ip.IsValid() || t.ip.IsValid() {
		return p.ip.IsValid() && t.ip.IsValid() && p.ip == t.ip
	}
	if p.wildcard {
		// The dot keeps "*.example.test" from matching "badexample.test"
		// and the suffix test from matching "example.test.evil".
		return strings.HasSuffix(t.host, "."+p.host)
	}
	return t.host == p.host
}

// matchesPort reports whether p admits t's port.
func (p pattern) matchesPort(t target) bool {
	if p.port == 0 {
		return t.port == 80 || t.port == 443
	}
	return t.port == p.port
}

// allowList is the parsed Config.Allow.
type allowList []pattern

// check returns nil when t is allowed, else the reason it is not.
func (a allowList) check(t target) error {
	hostListed := false
	for _, p := range a {
		if p.matchesHost(t) {
			if p.matchesPort(t) {
				return nil
			}
			hostListed = true
		}
	}
	if hostListed {
		return fmt.Errorf("port %d of %s is not in the allow-list", t.port, t.host)
	}
	return fmt.Errorf("host %s is not in the allow-list", t.host)
}

// wildcardOnly returns the wildcard entry that admits t when no entry
// naming t's host itself does: the name is then one the sandbox picked.
func (a allowList) wildcardOnly(t target) (pattern, bool) {
	var w pattern
	found := false
	for _, p := range a {
		if !p.matchesHost(t) || !p.matchesPort(t) {
			continue
		}
		if !p.wildcard {
			return pattern{}, false
		}
		if !found {
			w, found = p, true
		}
	}
	return w, found
}
