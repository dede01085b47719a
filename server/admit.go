package server

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/bytesize"
	"github.com/agentbox/agentbox/sandbox"
)

// quotaError is a refusal for a tenant's limit: it names the limit and
// what is in use, and answers 403 (429 for the rate).
type quotaError struct{ msg string }

func (e *quotaError) Error() string { return e.msg }

func quotaf(format string, args ...any) error { return &quotaError{fmt.Sprintf(format, args...)} }

// admit completes a spec from the API for tenant t and refuses what the
// tenant may not ask for. The spec is untrusted: every host path must lie
// under the tenant's host base with no symbolic link on the way, the
// policy must stay under the tenant's ceiling, and the server, not the
// caller, decides Detached and the tenant label. It does not count live
// sessions (reserve does, under the tenant's lock).
func (t *tenant) admit(sp *sandbox.Spec) error {
	lim := t.limits
	sp.Detached = true
	if sp.Labels == nil {
		sp.Labels = map[string]string{}
	}
	sp.Labels[labelTenant] = t.name
	if sp.Workspace != "" {
		ws, err := t.hostPath("workspace", sp.Workspace)
		if err != nil {
			return err
		}
		sp.Workspace = ws
	}
	for i, m := range sp.Mounts {
		src, err := t.hostPath("mount "+m.Target, m.Source)
		if err != nil {
			return err
		}
		sp.Mounts[i].Source = src
	}
	if err := sp.Policy.Validate(); err != nil {
		return err
	}
	r := &sp.Policy.Resources
	switch n := sp.Policy.Network; n.EffectiveMode() {
	case sandbox.NetworkHost:
		return sandbox.Errorf(sandbox.ErrInvalid, "policy.network: host networking is never allowed through the server; ask for an allow-list")
	case sandbox.NetworkAllowList:
		for _, h := range n.Allow {
			if !hostAllowed(lim.Network, h) {
				return sandbox.Errorf(sandbox.ErrInvalid, "policy.network.allow: %q is above tenant %s's ceiling (it may name %s)", h, t.name, listOrNone(lim.Network))
			}
		}
		sp.Policy.Network.Secrets = t.secretsFor(n)
	}
	if r.MemoryBytes == 0 {
		r.MemoryBytes = int64(lim.SessionMemory)
	}
	if r.CPUs == 0 {
		r.CPUs = lim.SessionCPUs
	}
	if lim.Disk > 0 && r.DiskBytes > int64(lim.Disk) {
		return sandbox.Errorf(sandbox.ErrInvalid, "policy.resources.disk_bytes: %s is above tenant %s's ceiling of %s", bytesize.Format(r.DiskBytes), t.name, bytesize.Format(int64(lim.Disk)))
	}
	if lim.ExecTimeout > 0 {
		if r.ExecTimeout > lim.ExecTimeout {
			return sandbox.Errorf(sandbox.ErrInvalid, "policy.resources.exec_timeout: %s is above tenant %s's ceiling of %s", r.ExecTimeout, t.name, lim.ExecTimeout)
		}
		if r.ExecTimeout == 0 {
			r.ExecTimeout = lim.ExecTimeout
		}
	}
	return nil
}

// labelTenant is the label naming a session's tenant.
const labelTenant = "agentbox.tenant"

// hostPath checks a host path a tenant named: absolute, under the
// tenant's host base, reached through no symbolic link (the backend then
// opens it by descriptor). It returns it cleaned.
func (t *tenant) hostPath(what, p string) (string, error) {
	base := t.limits.HostBase
	if base == "" {
		return "", sandbox.Errorf(sandbox.ErrInvalid, "%s: tenant %s may not name host paths (the operator set no host_base); leave it empty and the server makes the workspace", what, t.name)
	}
	if !filepath.IsAbs(p) {
		return "", sandbox.Errorf(sandbox.ErrInvalid, "%s: host path %q must be absolute", what, p)
	}
	clean := filepath.Clean(p)
	if clean != base && !strings.HasPrefix(clean, strings.TrimSuffix(base, "/")+"/") {
		return "", sandbox.Errorf(sandbox.ErrPathEscape, "%s: %q is outside tenant %s's host base %s", what, p, t.name, base)
	}
	real, err := filepath.EvalSymlinks(clean)
	if err != nil {
		return "", sandbox.Wrap(what, sandbox.ErrNotFound, err)
	}
	if real != clean {
		return "", sandbox.Errorf(sandbox.ErrPathEscape, "%s: %q is reached through a symbolic link", what, p)
	}
	return clean, nil
}

// hostAllowed reports whether the allow-list entry h is covered by the
// ceiling's entries.
func hostAllowed(ceiling []string, h string) bool {
	name := strings.ToLower(h)
	if host, _, ok := strings.Cut(name, ":"); ok {
		name = host
	}
	for _, c := range ceiling {
		c = strings.ToLower(c)
		if c == strings.ToLower(h) || c == name {
			return true
		}
		if suffix, ok := strings.CutPrefix(c, "*"); ok && strings.HasSuffix(name, suffix) {
			return true
		}
	}
	return false
}

func listOrNone(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ", ")
}

// reserveLocked checks that a session of spec fits the tenant's quota of
// live sessions, memory and CPUs, counting the sessions being created, and
// counts it among those; the caller holds t.mu and later calls
// t.pending.add with the opposite signs.
func (t *tenant) reserveLocked(sp sandbox.Spec) error {
	lim := t.limits
	var n int
	var mem int64
	var cpus float64
	for _, l := range t.sessions {
		if r, ok := l.holds(); ok {
			n++
			mem += r.MemoryBytes
			cpus += r.CPUs
		}
	}
	r := sp.Policy.Resources
	n, mem, cpus = n+t.pending.n, mem+t.pending.mem, cpus+t.pending.cpus
	switch {
	case lim.Sessions > 0 && n >= lim.Sessions:
		return quotaf("tenant %s: live sessions: limit %d, in use %d; delete one first", t.name, lim.Sessions, n)
	case lim.Memory > 0 && mem+r.MemoryBytes > int64(lim.Memory):
		return quotaf("tenant %s: memory: limit %s, in use %s, asked %s", t.name, bytesize.Format(int64(lim.Memory)), bytesize.Format(mem), bytesize.Format(r.MemoryBytes))
	case lim.CPUs > 0 && cpus+r.CPUs > lim.CPUs:
		return quotaf("tenant %s: cpus: limit %g, in use %g, asked %g", t.name, lim.CPUs, cpus, r.CPUs)
	}
	t.pending.add(r.MemoryBytes, r.CPUs, 1)
	return nil
}

// ttl is the TTL of a session that asked for asked: the tenant's when it
// asked none or more.
func (t *tenant) ttl(asked time.Duration) time.Duration {
	if asked <= 0 || (t.limits.TTL > 0 && asked > t.limits.TTL) {
		return t.limits.TTL
	}
	return asked
}

// usage is what sessions being created hold of a tenant's quota.
type usage struct {
	n    int
	mem  int64
	cpus float64
}

func (u *usage) add(mem int64, cpus float64, n int) {
	u.n += n
	u.mem += mem
	u.cpus += cpus
}

// secretsFor are the tenant's credentials for the hosts n admits. They
// are given again on every create and resume: Secrets are never
// serialized, so neither the registry nor a State holds them.
func (t *tenant) secretsFor(n sandbox.NetworkPolicy) []sandbox.Credential {
	if n.EffectiveMode() != sandbox.NetworkAllowList {
		return nil
	}
	var out []sandbox.Credential
	for _, s := range t.limits.Credentials {
		c, err := sandbox.ParseCredential(s) // validated with the config
		if err == nil && sandbox.HostCovered(n.Allow, c.Host) {
			out = append(out, c)
		}
	}
	return out
}
