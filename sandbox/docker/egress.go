package docker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/egress"
)

// The network allow-list: each such session gets its own --internal
// bridge network (no route out of it, no NAT), and the egress proxy
// listens on that bridge's gateway address only, so it is the one thing
// the container can reach. Two host firewall rules close what an internal
// network leaves open: the bridge's gateway address is a host address,
// so every host service bound to 0.0.0.0 would be reachable through it;
// INPUT from the bridge is therefore rejected except TCP to the proxy's
// port. DNS is pointed at a dead address so that the engine's embedded
// resolver cannot be used as a channel out; the proxy resolves names.
//
// This needs the engine on this host (a unix DOCKER_HOST: the proxy must
// listen in the bridge's network namespace, which is the host's), root,
// and iptables. Without them Enforces leaves network.allowlist out and
// Create refuses it.

// egressSupport says why the allow-list cannot be enforced, or "".
func (c *Client) egressSupport() string {
	switch {
	case !c.engine.internalNet:
		return "the engine has no bridge network driver"
	case !c.engine.local:
		return "the engine is not on this host (the proxy must listen on its bridge)"
	case os.Geteuid() != 0:
		return "agentbox is not root (needed for the bridge's firewall rules)"
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		return "iptables is not installed"
	}
	return ""
}

// egressLink is one session's network, proxy and firewall rules.
type egressLink struct {
	c       *Client
	netID   string
	bridge  string
	rules   [][]string
	proxy   *egress.Proxy
	lis     net.Listener
	proxyAt string
	// trustDir holds the CA bundle bound into the container, when the
	// proxy inspects TLS.
	trustDir string
}

// attachEgress creates the session's internal network and proxy and points
// the container at them. The returned func undoes it all (after the
// container is removed).
func (c *Client) attachEgress(ctx context.Context, s *session, plan *containerPlan) (func(), error) {
	const op = "docker: network allow-list"
	if why := c.egressSupport(); why != "" {
		return nil, sandbox.Wrap(op, sandbox.ErrPolicyUnsupported, errors.New(why))
	}
	l := &egressLink{c: c, bridge: bridgeName(s.id)}
	ok := false
	defer func() {
		if !ok {
			l.down()
		}
	}()
	name := "agentbox-" + s.id
	created, err := c.api.NetworkCreate(ctx, name, client.NetworkCreateOptions{
		Driver:   "bridge",
		Internal: true,
		Options:  map[string]string{"com.docker.network.bridge.name": l.bridge},
		Labels:   map[string]string{labelSession: s.id, labelOwnerPID: strconv.Itoa(os.Getpid()), labelOwnerHost: hostname()},
	})
	if err != nil {
		return nil, c.unavailable(op+": create network "+name, err)
	}
	l.netID = created.ID
	insp, err := c.api.NetworkInspect(ctx, created.ID, client.NetworkInspectOptions{})
	if err != nil {
		return nil, c.unavailable(op+": inspect network "+name, err)
	}
	var gw netip.Addr
	for _, cfg := range insp.Network.IPAM.Config {
		if cfg.Gateway.Is4() {
			gw = cfg.Gateway
		}
	}
	if !gw.IsValid() {
		return nil, sandbox.Errorf(sandbox.ErrUnavailable, "%s: network %s has no IPv4 gateway", op, name)
	}
	l.lis, err = net.Listen("tcp", netip.AddrPortFrom(gw, 0).String())
	if err != nil {
		return nil, sandbox.Wrap(op, sandbox.ErrUnavailable, fmt.Errorf("listen on the bridge gateway %s: %w", gw, err))
	}
	port := l.lis.Addr().(*net.TCPAddr).Port
	l.proxyAt = fmt.Sprintf("http://%s:%d", gw, port)
	// Reject everything from the bridge to the host, then (inserted above)
	// accept the proxy's port.
	for _, rule := range [][]string{
		{"INPUT", "-i", l.bridge, "-j", "REJECT"},
		{"INPUT", "-i", l.bridge, "-p", "tcp", "-d", gw.String(), "--dport", strconv.Itoa(port), "-j", "ACCEPT"},
	} {
		if err := iptables(append([]string{"-I"}, rule...)...); err != nil {
			return nil, sandbox.Wrap(op, sandbox.ErrUnavailable, err)
		}
		l.rules = append(l.rules, rule)
	}
	pol := s.spec.Policy.Network
	l.proxy, err = egress.New(egress.Config{
		Allow: pol.Allow, Credentials: pol.Credentials,
		Inspect: pol.Inspect, Rules: pol.Rules, Secrets: pol.Secrets,
		Dial: c.opts.EgressUpstream.Dial, UpstreamRoots: c.opts.EgressUpstream.Roots,
		Logger: c.log.With("session", s.id),
	})
	if err != nil {
		return nil, err
	}
	if ca := l.proxy.CACert(); ca != nil {
		if err := l.trust(plan, ca); err != nil {
			return nil, sandbox.Wrap(op, sandbox.ErrUnavailable, err)
		}
	}
	for k, v := range l.proxy.Placeholders() {
		plan.config.Env = append(plan.config.Env, k+"="+v)
	}
	go func() { _ = l.proxy.Serve(l.lis) }()

	plan.host.NetworkMode = container.NetworkMode(name)
	plan.config.NetworkDisabled = false
	plan.host.DNS = []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	plan.host.DNSOptions = []string{"timeout:1", "attempts:1"}
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"} {
		plan.config.Env = append(plan.config.Env, k+"="+l.proxyAt)
	}
	plan.config.Env = append(plan.config.Env, "NO_PROXY=localhost,127.0.0.1", "no_proxy=localhost,127.0.0.1")
	s.proxy = l.proxy
	ok = true
	return l.down, nil
}

// trustBundlePath is where the container sees the CA bundle.
const trustBundlePath = "/etc/agentbox/ca-bundle.pem"

// trust binds a bundle of this host's system roots and the proxy's CA
// read-only into the container and points TLS clients at it. (The
// image's own bundle cannot be read before the container runs; the
// host's is the usual public roots.)
func (l *egressLink) trust(plan *containerPlan, ca []byte) error {
	dir, err := os.MkdirTemp("", "agentbox-trust-")
	if err != nil {
		return fmt.Errorf("trust bundle: %w", err)
	}
	l.trustDir = dir
	if err := os.Chmod(dir, 0o755); err != nil {
		return fmt.Errorf("trust bundle: %w", err)
	}
	file := filepath.Join(dir, "ca-bundle.pem")
	if err := os.WriteFile(file, sandbox.TrustBundle(ca), 0o644); err != nil {
		return fmt.Errorf("trust bundle: %w", err)
	}
	plan.host.Mounts = append(plan.host.Mounts, mount.Mount{Type: mount.TypeBind, Source: file, Target: trustBundlePath, ReadOnly: true})
	for _, k := range egress.TrustEnv {
		plan.config.Env = append(plan.config.Env, k+"="+trustBundlePath)
	}
	return nil
}

// down closes the proxy, deletes the firewall rules and the network.
func (l *egressLink) down() {
	if l.trustDir != "" {
		_ = os.RemoveAll(l.trustDir)
	}
	if l.proxy != nil {
		_ = l.proxy.Close()
	} else if l.lis != nil {
		_ = l.lis.Close()
	}
	for _, r := range l.rules {
		if err := iptables(append([]string{"-D"}, r...)...); err != nil {
			l.c.log.Warn("docker: remove firewall rule", "rule", strings.Join(r, " "), "err", err)
		}
	}
	if l.netID != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if _, err := l.c.api.NetworkRemove(ctx, l.netID, client.NetworkRemoveOptions{}); err != nil {
			l.c.log.Warn("docker: remove network", "network", l.netID, "err", err)
		}
	}
}

// bridgeName is the session network's bridge interface (at most 15 bytes).
func bridgeName(sessionID string) string {
	n := "ab-" + strings.TrimPrefix(sessionID, "dk-")
	if len(n) > 15 {
		n = n[:15]
	}
	return n
}

func iptables(args ...string) error {
	out, err := exec.Command("iptables", append([]string{"-w", "5"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("iptables %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// reapBridgeRules deletes INPUT rules left for bridges that no longer
// exist (a crashed agentbox could not remove them).
func reapBridgeRules(log func(string)) error {
	out, err := exec.Command("iptables", "-w", "5", "-S", "INPUT").Output()
	if err != nil {
		return fmt.Errorf("iptables -S INPUT: %w", err)
	}
	var errs []error
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || f[0] != "-A" || f[2] != "-i" || !strings.HasPrefix(f[3], "ab-") {
			continue
		}
		if _, err := net.InterfaceByName(f[3]); err == nil {
			continue // its session is alive
		}
		if err := iptables(append([]string{"-D"}, f[1:]...)...); err != nil {
			errs = append(errs, err)
			continue
		}
		log("removed firewall rule of gone bridge " + f[3])
	}
	return errors.Join(errs...)
}
