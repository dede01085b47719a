package kube

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/egress"
)

// The network allow-list: the session's egress proxy (sandbox/egress,
// with the same host rules and credentials as on the other backends)
// runs in this process and listens on Options.EgressAddress, an address
// of this host that the Pods reach. The session's NetworkPolicy denies
// all ingress, and all egress but TCP to that address and port; the
// proxy serves only connections from the session Pod's address, so that
// another Pod that reaches the listener cannot use this session's
// allow-list and credentials. For inspected hosts the Pod trusts the
// proxy's CA through a bundle written to its /tmp and the usual
// variables (egress.TrustEnv). The policy is proved as network none's is
// (netproof.go). Pod addresses must reach the listener untranslated (no
// SNAT between the Pods and this host), or the session reaches nothing.
// The proxy lives with this process: a session resumed elsewhere has
// none, and Resume refuses it.

// egressLink is one session's proxy and listener.
type egressLink struct {
	proxy *egress.Proxy
	lis   *podListener
	addr  netip.AddrPort
}

// startEgress makes the session's proxy and its listener; the listener
// admits no one until admit names the Pod's address.
func (c *Client) startEgress(spec sandbox.Spec) (*egressLink, error) {
	const op = "kube: network allow-list"
	ip, err := netip.ParseAddr(c.opts.EgressAddress)
	if err != nil {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "%s: egress address %q: %v", op, c.opts.EgressAddress, err)
	}
	l, err := net.Listen("tcp", netip.AddrPortFrom(ip, 0).String())
	if err != nil {
		return nil, sandbox.Wrap(op, sandbox.ErrUnavailable, fmt.Errorf("listen on %s: %w", ip, err))
	}
	pol := spec.Policy.Network
	proxy, err := egress.New(egress.Config{
		Allow: pol.Allow, Credentials: pol.Credentials, Rules: pol.Rules,
		Inspect: pol.Inspect, Secrets: pol.Secrets,
		Dial: c.opts.EgressUpstream.Dial, UpstreamRoots: c.opts.EgressUpstream.Roots,
		Logger: c.log,
	})
	if err != nil {
		l.Close()
		return nil, err
	}
	return &egressLink{proxy: proxy, lis: &podListener{Listener: l}, addr: l.Addr().(*net.TCPAddr).AddrPort()}, nil
}

// env is what points the session's commands at the proxy.
func (l *egressLink) env() map[string]string {
	at := "http://" + l.addr.String()
	env := map[string]string{"NO_PROXY": "localhost,127.0.0.1", "no_proxy": "localhost,127.0.0.1"}
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"} {
		env[k] = at
	}
	for k, v := range l.proxy.Placeholders() {
		env[k] = v
	}
	if l.proxy.CACert() != nil {
		for _, k := range egress.TrustEnv {
			env[k] = trustBundlePath
		}
	}
	return env
}

// trustBundlePath is where the session's TLS clients find the system
// roots and its proxy's CA, on the Pod's /tmp: the session may change
// it, which changes only what it trusts itself.
const trustBundlePath = "/tmp/.agentbox-trust/ca-bundle.pem"

// trust writes the trust bundle into the Pod, when the proxy inspects TLS.
func (l *egressLink) trust(ctx context.Context, s *session) error {
	ca := l.proxy.CACert()
	if ca == nil {
		return nil
	}
	_, err := s.run(ctx, "kube: write the trust bundle of pod "+s.h.Pod,
		`mkdir -p "${1%/*}" && cat >"$1"`, bytes.NewReader(sandbox.TrustBundle(ca)), 1<<10, trustBundlePath)
	return err
}

// serve admits the Pod at podIP and serves it.
func (l *egressLink) serve(podIP string) error {
	ip, err := netip.ParseAddr(podIP)
	if err != nil {
		return fmt.Errorf("pod address %q: %w", podIP, err)
	}
	l.lis.pod = ip.Unmap()
	go func() { _ = l.proxy.Serve(l.lis) }()
	return nil
}

// close stops the proxy and its listener.
func (l *egressLink) close() {
	if l != nil {
		_ = l.proxy.Close()
		_ = l.lis.Close()
	}
}

// egressRule admits TCP to the proxy's address and port only.
func (l *egressLink) egressRule() networkingv1.NetworkPolicyEgressRule {
	bits := 32
	if l.addr.Addr().Is6() {
		bits = 128
	}
	port := intstr.FromInt32(int32(l.addr.Port()))
	return networkingv1.NetworkPolicyEgressRule{
		To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: l.addr.Addr().String() + "/" + strconv.Itoa(bits)}}},
		Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr(corev1.ProtocolTCP), Port: &port}},
	}
}

// podListener accepts only connections from the session Pod's address:
// the listener is on an address every Pod may reach.
type podListener struct {
	net.Listener
	pod netip.Addr
}

func (p *podListener) Accept() (net.Conn, error) {
	for {
		c, err := p.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if a, ok := c.RemoteAddr().(*net.TCPAddr); ok && p.pod.IsValid() && a.AddrPort().Addr().Unmap() == p.pod {
			return c, nil
		}
		c.Close()
	}
}
