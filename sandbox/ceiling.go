package sandbox

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Bound is the policy a caller who asked for asked gets under ceiling, an
// operator's policy: every value of ceiling is a ceiling. A limit asked
// for is kept when it is no more than the ceiling's, a limit left unset
// (zero) takes the ceiling's, and a limit above the ceiling is an
// ErrInvalid that names it and the ceiling, so the caller can ask again.
// The network may only narrow (none, or hosts the ceiling's allow-list
// covers, or anything under a host-network ceiling); read-only and denied
// paths only add to the ceiling's. Credentials come from the ceiling only,
// for the hosts kept. An untrusted caller (a model, an API client) cannot
// raise anything through it.
func Bound(ceiling, asked Policy) (Policy, error) {
	if err := ceiling.Validate(); err != nil {
		return Policy{}, fmt.Errorf("ceiling: %w", err)
	}
	if err := asked.Validate(); err != nil {
		return Policy{}, err
	}
	out := ceiling
	net, err := boundNetwork(ceiling.Network, asked.Network)
	if err != nil {
		return Policy{}, err
	}
	out.Network = net
	out.Filesystem = FilesystemPolicy{
		ReadOnly: union(ceiling.Filesystem.ReadOnly, asked.Filesystem.ReadOnly),
		Deny:     union(ceiling.Filesystem.Deny, asked.Filesystem.Deny),
	}
	c, a, r := ceiling.Resources, asked.Resources, &out.Resources
	var errs []string
	limit := func(name string, asked, ceil int64, dst *int64, show func(int64) string) {
		switch {
		case asked == 0:
		case ceil > 0 && asked > ceil:
			errs = append(errs, fmt.Sprintf("%s %s is above the operator's ceiling of %s", name, show(asked), show(ceil)))
		default:
			*dst = asked
		}
	}
	count := func(v int64) string { return fmt.Sprint(v) }
	bytes := func(v int64) string { return fmt.Sprintf("%d bytes", v) }
	dur := func(v int64) string { return time.Duration(v).String() }
	limit("memory", a.MemoryBytes, c.MemoryBytes, &r.MemoryBytes, bytes)
	limit("pids", a.Pids, c.Pids, &r.Pids, count)
	limit("disk", a.DiskBytes, c.DiskBytes, &r.DiskBytes, bytes)
	limit("output", a.OutputBytes, c.OutputBytes, &r.OutputBytes, bytes)
	limit("exec timeout", int64(a.ExecTimeout), int64(c.ExecTimeout), (*int64)(&r.ExecTimeout), dur)
	limit("session timeout", int64(a.SessionTimeout), int64(c.SessionTimeout), (*int64)(&r.SessionTimeout), dur)
	limit("idle timeout", int64(a.IdleTimeout), int64(c.IdleTimeout), (*int64)(&r.IdleTimeout), dur)
	switch {
	case a.CPUs == 0:
	case c.CPUs > 0 && a.CPUs > c.CPUs:
		errs = append(errs, fmt.Sprintf("cpus %g is above the operator's ceiling of %g", a.CPUs, c.CPUs))
	default:
		r.CPUs = a.CPUs
	}
	if len(errs) > 0 {
		return Policy{}, Errorf(ErrInvalid, "policy: %s (ask for less, or leave it out to get the ceiling)", strings.Join(errs, "; "))
	}
	return out, nil
}

// boundNetwork narrows the ceiling's network to what was asked.
func boundNetwork(ceiling, asked NetworkPolicy) (NetworkPolicy, error) {
	cm, am := ceiling.EffectiveMode(), asked.EffectiveMode()
	if asked.Mode == "" {
		return ceiling, nil // not asked: the ceiling
	}
	switch {
	case am == NetworkNone:
		return NetworkPolicy{Mode: NetworkNone}, nil
	case cm == NetworkHost:
		return NetworkPolicy{Mode: am, Allow: asked.Allow, Inspect: asked.Inspect, Rules: asked.Rules}, nil
	case am == NetworkHost:
		return NetworkPolicy{}, Errorf(ErrInvalid, "policy: network host is above the operator's ceiling (%s)", describeNetwork(ceiling))
	case cm == NetworkNone:
		return NetworkPolicy{}, Errorf(ErrInvalid, "policy: network %s is above the operator's ceiling (no network)", strings.Join(asked.Allow, ","))
	}
	out := NetworkPolicy{Mode: NetworkAllowList}
	var above []string
	for _, h := range asked.Allow {
		if !HostCovered(ceiling.Allow, h) {
			above = append(above, h)
			continue
		}
		out.Allow = append(out.Allow, h)
	}
	if len(above) > 0 {
		return NetworkPolicy{}, Errorf(ErrInvalid, "policy: network host %s is above the operator's ceiling (%s)", strings.Join(above, ", "), describeNetwork(ceiling))
	}
	for host, creds := range ceiling.Credentials {
		if HostCovered(out.Allow, host) {
			if out.Credentials == nil {
				out.Credentials = map[string]map[string]string{}
			}
			out.Credentials[host] = creds
		}
	}
	for _, c := range ceiling.Secrets {
		if HostCovered(out.Allow, c.Host) {
			out.Secrets = append(out.Secrets, c)
		}
	}
	for _, h := range union(ceiling.Inspect, asked.Inspect) {
		if HostCovered(out.Allow, h) {
			out.Inspect = append(out.Inspect, h)
		}
	}
	// Rules only narrow: the operator's rules for a host stand, and the
	// caller may add rules only for hosts the operator left unruled
	// (adding a rule beside the operator's would admit more).
	ruled := map[string]bool{}
	for _, r := range ceiling.Rules {
		if HostCovered(out.Allow, r.Host) {
			out.Rules = append(out.Rules, r)
			ruled[strings.ToLower(r.Host)] = true
		}
	}
	for _, r := range asked.Rules {
		if ruled[strings.ToLower(r.Host)] {
			return NetworkPolicy{}, Errorf(ErrInvalid, "policy: request rules for %s are set by the operator; a rule beside them would admit more", r.Host)
		}
		out.Rules = append(out.Rules, r)
	}
	return out, nil
}

// HostCovered reports whether the allow-list entry h (a name, "*.name",
// with or without ":port") admits nothing that list does not: it is in
// list, or under one of list's "*." entries; a list entry without a port
// covers every port.
func HostCovered(list []string, h string) bool {
	h = strings.ToLower(h)
	name, port, hasPort := strings.Cut(h, ":")
	for _, c := range list {
		c = strings.ToLower(c)
		cname, cport, cHasPort := strings.Cut(c, ":")
		if cHasPort && (!hasPort || port != cport) {
			continue
		}
		if cname == name {
			return true
		}
		// "*.example.com" covers "a.example.com" and "*.a.example.com",
		// not "example.com" itself.
		if suffix, ok := strings.CutPrefix(cname, "*"); ok && strings.HasSuffix(strings.TrimPrefix(name, "*"), suffix) && strings.TrimPrefix(name, "*") != suffix {
			return true
		}
	}
	return false
}

func describeNetwork(n NetworkPolicy) string {
	switch n.EffectiveMode() {
	case NetworkNone:
		return "no network"
	case NetworkHost:
		return "host network"
	}
	return "hosts " + strings.Join(n.Allow, ", ")
}

// union is a followed by what b has that a does not.
func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, v := range b {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}
