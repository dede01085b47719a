// Package egress is agentbox's allow-list egress proxy. It runs outside the
// sandbox; the sandbox reaches it (through a unix socket bridged into its
// network namespace) as its HTTP(S)_PROXY and has no other route out.
//
// It admits two kinds of request, and only to hosts on the allow-list:
//
//   - HTTP CONNECT host:port, tunnelled as raw bytes (TLS stays end to end,
//     so the proxy sees the name but not the content);
//   - plain HTTP with an absolute-form URI (GET http://host/path), which it
//     forwards itself: hop-by-hop headers and Proxy-Authorization are
//     stripped, the Host header is forced to the URL's host, and
//     per-host credential headers are injected so that secrets never enter
//     the sandbox. Response headers that would carry an injected secret
//     back are dropped (a server that echoes it in the body cannot be
//     stopped; do not give credentials to such hosts).
//
// Everything else is refused with 403 (not listed) or 400 (malformed), and
// every refusal is logged and kept for Denials.
//
// # Allow-list entries
//
//	example.com        ports 80 and 443 of example.com only
//	example.com:8443   port 8443 only
//	*.example.com      any subdomain (a.example.com, a.b.example.com), not
//	                   example.com itself: list both to allow both
//	203.0.113.7:443    an IP literal: only requests for that literal address
//
// # Addresses
//
// A listed name is resolved by the proxy, and it dials only the addresses it
// checked: any that is loopback, private, link-local (including cloud
// metadata at 169.254.169.254), CGNAT, multicast, unspecified or otherwise
// not globally routable is dropped, and if none is left the request is
// refused. This stops DNS rebinding onto the host's own services (a listed
// name that suddenly resolves to 127.0.0.1). The only way to reach such an
// address is to list it as an IP literal, explicitly. Config.Dial replaces
// resolution and dialling altogether and so also this check; it exists for
// tests.
//
// # Names a wildcard admits
//
// A wildcard entry lets the sandbox choose names the proxy resolves, and a
// resolution carries the name to the zone's name servers: a channel out
// even when no connection follows. Such names are bounded (label and name
// length, distinct names per proxy, a rate of new ones; see NameLimits),
// checked before anything is resolved, and a name refused is a recorded
// denial like any other. Names an entry lists exactly are not bounded.
//
// Requests inside a CONNECT tunnel cannot be inspected: a TLS client may
// present another name (SNI, Host) to a listed server, as in domain
// fronting through a shared CDN. The allow-list bounds where bytes go, not
// what a listed server does with them.
package egress
