package sandbox

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
)

// Policy is what a sandbox may touch. The zero Policy is the strictest
// sensible one: no network, no extra paths, default identity, no resource
// limits beyond the backend's defaults.
type Policy struct {
	Network    NetworkPolicy    `json:"network"`
	Filesystem FilesystemPolicy `json:"filesystem"`
	Resources  Resources        `json:"resources"`
}

// NetworkMode says what network the sandbox has.
type NetworkMode string

const (
	// NetworkNone is a network namespace with loopback only (the default).
	NetworkNone NetworkMode = "none"
	// NetworkAllowList reaches only the hosts in NetworkPolicy.Allow,
	// through the egress proxy (HTTP CONNECT and plain HTTP).
	NetworkAllowList NetworkMode = "allowlist"
	// NetworkHost shares the host's network: no confinement at all.
	NetworkHost NetworkMode = "host"
)

// NetworkPolicy is the network part of a Policy.
type NetworkPolicy struct {
	// Mode defaults to NetworkNone when empty.
	Mode NetworkMode `json:"mode,omitempty"`
	// Allow lists host names (or host:port) for NetworkAllowList. A
	// leading "*." allows every subdomain.
	Allow []string `json:"allow,omitempty"`
	// Credentials are headers the egress proxy adds to plain-HTTP requests
	// per allowed host, so that no secret enters the sandbox. They are
	// never serialized.
	Credentials map[string]map[string]string `json:"-"`
	// Inspect lists allow-list entries (or hosts they admit) whose HTTPS
	// the egress proxy terminates with a per-session CA the sandbox
	// trusts, so that Rules and Secrets apply to it. Hosts named by a
	// rule or a secret are inspected without being listed here; every
	// other allowed host keeps an end-to-end CONNECT tunnel.
	Inspect []string `json:"inspect,omitempty"`
	// Rules admit requests to inspected hosts by method and path.
	Rules []RequestRule `json:"rules,omitempty"`
	// Secrets are credentials the egress proxy adds to requests (HTTPS,
	// inspected, and plain HTTP). Never serialized, so never in a Spec,
	// a State, a trace or the server's registry.
	Secrets []Credential `json:"-"`
}

// Inspected is every host the egress proxy inspects: Inspect and the
// hosts of Rules and Secrets, each once.
func (n NetworkPolicy) Inspected() []string {
	out := slices.Clone(n.Inspect)
	for _, r := range n.Rules {
		out = append(out, r.Host)
	}
	for _, c := range n.Secrets {
		out = append(out, c.Host)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// EffectiveMode is Mode with the default applied.
func (n NetworkPolicy) EffectiveMode() NetworkMode {
	if n.Mode == "" {
		return NetworkNone
	}
	return n.Mode
}

// FilesystemPolicy is the filesystem part of a Policy, beyond the layout
// every backend gives (workspace read-write, tools read-only).
type FilesystemPolicy struct {
	// ReadOnly are sandbox paths that must not be writable (e.g. a
	// workspace subdirectory holding inputs).
	ReadOnly []string `json:"read_only,omitempty"`
	// Deny are sandbox paths that must be neither readable nor writable.
	Deny []string `json:"deny,omitempty"`
}

// Resources bound what a session may consume. Zero means "backend default"
// for limits that always exist, and "unlimited" otherwise.
type Resources struct {
	// MemoryBytes caps the session's memory (all its processes).
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
	// Pids caps the number of processes and threads in the session.
	Pids int64 `json:"pids,omitempty"`
	// CPUs caps CPU time as a number of cores (1.5 = one and a half).
	CPUs float64 `json:"cpus,omitempty"`
	// DiskBytes caps what the workspace may hold.
	DiskBytes int64 `json:"disk_bytes,omitempty"`
	// ExecTimeout is the wall-clock limit of each command.
	ExecTimeout time.Duration `json:"exec_timeout,omitempty"`
	// SessionTimeout is the wall-clock limit of the whole session.
	SessionTimeout time.Duration `json:"session_timeout,omitempty"`
	// IdleTimeout ends the session once it has been idle this long: no
	// command running that was started through the session, and no
	// request (a command's start, sandbox.Extend) made of it meanwhile.
	// What a finished command left in the background does not count,
	// nor does paused time (the idle clock starts again at unpause).
	IdleTimeout time.Duration `json:"idle_timeout,omitempty"`
	// OutputBytes caps the captured stdout and stderr of each Exec (each
	// stream); past it output is dropped and the result says so.
	OutputBytes int64 `json:"output_bytes,omitempty"`
}

// DefaultOutputBytes is the per-stream output cap when Resources sets none.
const DefaultOutputBytes = 1 << 20

// Part names one enforceable piece of a Policy. A backend's Enforces lists
// the parts it can enforce; Check compares them with what a Policy needs.
type Part string

// The policy parts. Every backend names the ones it enforces.
const (
	// PartFilesystem: the host filesystem outside the workspace, mounts and
	// tool directories is invisible, and tools are read-only.
	PartFilesystem Part = "filesystem.isolation"
	// PartReadOnlyPaths: FilesystemPolicy.ReadOnly and read-only mounts.
	PartReadOnlyPaths Part = "filesystem.read_only"
	// PartDenyPaths: FilesystemPolicy.Deny.
	PartDenyPaths Part = "filesystem.deny"
	// PartNetworkNone: no network but loopback.
	PartNetworkNone Part = "network.none"
	// PartNetworkAllowList: egress only to listed hosts.
	PartNetworkAllowList Part = "network.allowlist"
	// PartNetworkInspect: the egress proxy terminates the TLS of
	// inspected hosts, applies request rules and adds credentials
	// (NetworkPolicy.Inspect, Rules, Secrets).
	PartNetworkInspect Part = "network.inspect"
	// PartProcesses: host processes are invisible and unsignalable.
	PartProcesses Part = "processes.isolation"
	// PartIdentity: commands run unprivileged, no capabilities, no new
	// privileges, and a filtered system-call surface.
	PartIdentity Part = "identity"
	PartMemory   Part = "resources.memory"
	PartPids     Part = "resources.pids"
	PartCPU      Part = "resources.cpu"
	PartDisk     Part = "resources.disk"
	// PartTimeout: exec and session timeouts kill the whole process tree.
	PartTimeout Part = "resources.timeout"
	// PartOutput: the per-exec output cap.
	PartOutput Part = "resources.output"
	// PartIdleTimeout: the idle timeout ends an idle session.
	PartIdleTimeout Part = "resources.idle_timeout"
)

// AllParts is every policy part, in a stable order.
var AllParts = []Part{
	PartFilesystem, PartReadOnlyPaths, PartDenyPaths, PartNetworkNone,
	PartNetworkAllowList, PartNetworkInspect, PartProcesses, PartIdentity, PartMemory, PartPids,
	PartCPU, PartDisk, PartTimeout, PartOutput, PartIdleTimeout,
}

// Requires lists the parts that enforcing p needs. Isolation parts
// (filesystem, processes, identity) are always required: a sandbox that
// cannot provide them must say so.
func (p Policy) Requires() []Part {
	parts := []Part{PartFilesystem, PartProcesses, PartIdentity, PartOutput}
	switch p.Network.EffectiveMode() {
	case NetworkNone:
		parts = append(parts, PartNetworkNone)
	case NetworkAllowList:
		parts = append(parts, PartNetworkAllowList)
		if len(p.Network.Inspected()) > 0 {
			parts = append(parts, PartNetworkInspect)
		}
	}
	if len(p.Filesystem.ReadOnly) > 0 {
		parts = append(parts, PartReadOnlyPaths)
	}
	if len(p.Filesystem.Deny) > 0 {
		parts = append(parts, PartDenyPaths)
	}
	r := p.Resources
	if r.MemoryBytes > 0 {
		parts = append(parts, PartMemory)
	}
	if r.Pids > 0 {
		parts = append(parts, PartPids)
	}
	if r.CPUs > 0 {
		parts = append(parts, PartCPU)
	}
	if r.DiskBytes > 0 {
		parts = append(parts, PartDisk)
	}
	if r.ExecTimeout > 0 || r.SessionTimeout > 0 {
		parts = append(parts, PartTimeout)
	}
	if r.IdleTimeout > 0 {
		parts = append(parts, PartIdleTimeout)
	}
	return parts
}

// Validate reports a policy that contradicts itself or is malformed.
func (p Policy) Validate() error {
	n := p.Network
	switch n.EffectiveMode() {
	case NetworkNone, NetworkHost:
		if len(n.Allow) > 0 {
			return Errorf(ErrInvalid, "policy: network %q with an allow-list (%s): choose one", n.EffectiveMode(), strings.Join(n.Allow, ","))
		}
		if len(n.Inspect)+len(n.Rules)+len(n.Secrets) > 0 {
			return Errorf(ErrInvalid, "policy: network %q with inspection, request rules or credentials, which need an allow-list", n.EffectiveMode())
		}
	case NetworkAllowList:
		if len(n.Allow) == 0 {
			return Errorf(ErrInvalid, "policy: network allow-list is empty")
		}
		for _, h := range n.Allow {
			if err := ValidateHostPattern(h); err != nil {
				return err
			}
		}
		if err := n.validateInspection(); err != nil {
			return err
		}
	default:
		return Errorf(ErrInvalid, "policy: unknown network mode %q", n.Mode)
	}
	r := p.Resources
	for name, v := range map[string]int64{
		"memory": r.MemoryBytes, "pids": r.Pids, "disk": r.DiskBytes,
		"output": r.OutputBytes, "exec timeout": int64(r.ExecTimeout),
		"session timeout": int64(r.SessionTimeout),
		"idle timeout":    int64(r.IdleTimeout),
	} {
		if v < 0 {
			return Errorf(ErrInvalid, "policy: %s limit is negative", name)
		}
	}
	if r.CPUs < 0 {
		return Errorf(ErrInvalid, "policy: cpus limit is negative")
	}
	if r.MemoryBytes > 0 && r.MemoryBytes < 4<<20 {
		return Errorf(ErrInvalid, "policy: memory limit %d bytes is below the 4 MiB minimum", r.MemoryBytes)
	}
	for _, list := range [][]string{p.Filesystem.ReadOnly, p.Filesystem.Deny} {
		for _, path := range list {
			if !strings.HasPrefix(path, "/") {
				return Errorf(ErrInvalid, "policy: path %q must be an absolute sandbox path", path)
			}
		}
	}
	return nil
}

// validateInspection checks that inspected hosts, rules and secrets are
// well formed and name hosts the allow-list admits, so a typo does not
// silently leave a host uninspected or a secret unsent.
func (n NetworkPolicy) validateInspection() error {
	for _, h := range n.Inspect {
		if err := ValidateHostPattern(h); err != nil {
			return err
		}
	}
	for _, r := range n.Rules {
		if err := r.Validate(); err != nil {
			return err
		}
	}
	for _, c := range n.Secrets {
		if err := c.Validate(); err != nil {
			return err
		}
	}
	for _, h := range n.Inspected() {
		if !HostCovered(n.Allow, h) {
			return Errorf(ErrInvalid, "policy: %s is inspected (or has rules or credentials) but the allow-list (%s) does not admit it", h, strings.Join(n.Allow, ","))
		}
	}
	return nil
}

// ValidateHostPattern checks one allow-list entry: a DNS name, optionally
// with a leading "*." and a ":port".
func ValidateHostPattern(h string) error {
	if scheme, rest, ok := strings.Cut(h, "://"); ok {
		// A URL where a host name belongs: say which name to give.
		name, _, _ := strings.Cut(rest, "/")
		return Errorf(ErrInvalid, "policy: allow-list entry %q is a URL; give the host name alone (%s), without %s:// or a path", h, name, scheme)
	}
	host := strings.TrimPrefix(h, "*.")
	if i := strings.LastIndexByte(host, ':'); i >= 0 {
		port := host[i+1:]
		host = host[:i]
		if port == "" || strings.Trim(port, "0123456789") != "" || len(port) > 5 {
			return Errorf(ErrInvalid, "policy: allow-list entry %q has a bad port", h)
		}
	}
	if host == "" || len(host) > 253 {
		return Errorf(ErrInvalid, "policy: allow-list entry %q is not a host name", h)
	}
	for _, label := range strings.Split(host, ".") {
		if label == "" || len(label) > 63 || strings.HasPrefix(label, "-") || strings.HasSuffix(label, "-") {
			return Errorf(ErrInvalid, "policy: allow-list entry %q is not a host name", h)
		}
		for _, c := range label {
			if !(c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
				return Errorf(ErrInvalid, "policy: allow-list entry %q is not a host name", h)
			}
		}
	}
	return nil
}

// Check compares what p requires with what a backend enforces. A missing
// part is an ErrPolicyUnsupported naming it, unless allowWeaker, in which
// case each missing part is logged as a warning and Check returns the list.
func Check(backend string, enforces []Part, p Policy, allowWeaker bool, log *slog.Logger) ([]Part, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var missing []Part
	for _, part := range p.Requires() {
		if !slices.Contains(enforces, part) {
			missing = append(missing, part)
		}
	}
	if len(missing) == 0 {
		return nil, nil
	}
	names := make([]string, len(missing))
	for i, m := range missing {
		names[i] = string(m)
	}
	if !allowWeaker {
		return missing, &Error{
			Op:   backend + ": create",
			Kind: ErrPolicyUnsupported,
			Err:  fmt.Errorf("cannot enforce %s on this host ('agentbox backends' says why; ask for less, or pass --allow-weaker to run without)", strings.Join(names, ", ")),
		}
	}
	if log == nil {
		log = slog.Default()
	}
	log.Warn("policy parts NOT enforced (allowed weaker)", "backend", backend, "parts", strings.Join(names, ","))
	return missing, nil
}
