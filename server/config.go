package server

import (
	"bytes"
	"fmt"
	"github.com/agentbox/agentbox/sandbox"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/agentbox/agentbox/internal/bytesize"
)

// Config is the server's configuration file: default limits for every
// tenant, and per-tenant overrides.
//
//	defaults:
//	  sessions: 10
//	  memory: 8G
//	tenants:
//	  audit:
//	    sessions: 100
//	    host_base: /srv/agentbox/audit
type Config struct {
	Defaults Limits            `yaml:"defaults"`
	Tenants  map[string]Limits `yaml:"tenants"`
}

// Limits are what one tenant may use. A zero field takes the defaults'
// value; a zero default is the built-in one (see DefaultLimits) or none.
type Limits struct {
	// Sessions caps the tenant's live sessions.
	Sessions int `yaml:"sessions"`
	// Memory caps the sum of its sessions' memory limits (bytes, or a
	// size like 8G); SessionMemory is what a session that sets none gets.
	Memory        Size `yaml:"memory"`
	SessionMemory Size `yaml:"session_memory"`
	// CPUs caps the sum of its sessions' CPU limits; SessionCPUs is what
	// a session that sets none gets.
	CPUs        float64 `yaml:"cpus"`
	SessionCPUs float64 `yaml:"session_cpus"`
	// Disk caps one session's workspace quota.
	Disk Size `yaml:"disk"`
	// ExecTimeout caps one command's timeout; a session that sets none
	// gets it.
	ExecTimeout time.Duration `yaml:"exec_timeout"`
	// TTL caps a session's lifetime and is its default; IdleTimeout is the
	// default idle timeout.
	TTL         time.Duration `yaml:"ttl"`
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// Network lists the hosts a session's allow-list may name ("*.x.com"
	// covers its subdomains); empty: no network at all. Host networking
	// is never allowed.
	Network []string `yaml:"network"`
	// Credentials are secrets the server's egress proxy adds to requests
	// of the tenant's sessions, in the syntax of agentbox exec
	// --credential (HOST[/PREFIX]=KIND:SOURCE, read by the server). A
	// session gets those whose host its allow-list admits; an API client
	// never sees or sends one, and none is written to the registry.
	Credentials []string `yaml:"credentials"`
	// HostBase is the host directory under which a session's workspace
	// and mounts may lie; empty: none (the backend makes the workspace).
	HostBase string `yaml:"host_base"`
	// Body caps a request's body (bytes, or a size like 64M).
	Body Size `yaml:"body"`
	// Rate caps the tenant's requests per second (a burst of twice that
	// is allowed); 0 for none.
	Rate float64 `yaml:"rate"`
	// Pool keeps this many sessions of the tenant's default spec (what a
	// create with an empty spec gets) made ahead, so that such a create
	// returns one at once (package sandbox/pool); 0 for none. A pooled
	// session counts in the quota once handed out.
	Pool int `yaml:"pool"`
}

// DefaultLimits apply where neither the tenant nor the defaults say.
var DefaultLimits = Limits{
	Sessions:      16,
	SessionMemory: 1 << 30,
	TTL:           24 * time.Hour,
	IdleTimeout:   time.Hour,
	Body:          64 << 20,
}

// Size is a byte count written as a number or a size such as 512M.
type Size int64

// UnmarshalYAML reads 1073741824, 1G or 512M.
func (s *Size) UnmarshalYAML(n *yaml.Node) error {
	v, err := bytesize.Parse(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*s = Size(v)
	return nil
}

// LoadConfig reads a configuration file; unknown keys are errors.
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("server config: %w", err)
	}
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && err.Error() != "EOF" {
		return Config{}, fmt.Errorf("server config %s: %w", path, err)
	}
	if err := c.validate(); err != nil {
		return Config{}, fmt.Errorf("server config %s: %w", path, err)
	}
	return c, nil
}

func (c Config) validate() error {
	check := func(where string, l Limits) error {
		if l.HostBase != "" && !filepath.IsAbs(l.HostBase) {
			return fmt.Errorf("%s: host_base %q must be an absolute path", where, l.HostBase)
		}
		for _, h := range l.Network {
			if h == "" || strings.ContainsAny(h, " /") {
				return fmt.Errorf("%s: network entry %q is not a host name", where, h)
			}
		}
		for _, c := range l.Credentials {
			if _, err := sandbox.ParseCredential(c); err != nil {
				return fmt.Errorf("%s: credentials: %w", where, err)
			}
		}
		if l.Sessions < 0 || l.Memory < 0 || l.CPUs < 0 || l.Rate < 0 || l.Body < 0 || l.Pool < 0 {
			return fmt.Errorf("%s: limits cannot be negative", where)
		}
		return nil
	}
	if err := check("defaults", c.Defaults); err != nil {
		return err
	}
	for name, l := range c.Tenants {
		if err := validTenant(name); err != nil {
			return err
		}
		if err := check("tenant "+name, l); err != nil {
			return err
		}
	}
	return nil
}

// limits are tenant name's limits: its own, else the defaults', else
// DefaultLimits'.
func (c Config) limits(name string) Limits {
	out := c.Tenants[name]
	for _, base := range []Limits{c.Defaults, DefaultLimits} {
		out = fill(out, base)
	}
	return out
}

// fill sets l's zero fields from base.
func fill(l, base Limits) Limits {
	if l.Sessions == 0 {
		l.Sessions = base.Sessions
	}
	if l.Memory == 0 {
		l.Memory = base.Memory
	}
	if l.SessionMemory == 0 {
		l.SessionMemory = base.SessionMemory
	}
	if l.CPUs == 0 {
		l.CPUs = base.CPUs
	}
	if l.SessionCPUs == 0 {
		l.SessionCPUs = base.SessionCPUs
	}
	if l.Disk == 0 {
		l.Disk = base.Disk
	}
	if l.ExecTimeout == 0 {
		l.ExecTimeout = base.ExecTimeout
	}
	if l.TTL == 0 {
		l.TTL = base.TTL
	}
	if l.IdleTimeout == 0 {
		l.IdleTimeout = base.IdleTimeout
	}
	if l.Network == nil {
		l.Network = base.Network
	}
	if l.Credentials == nil {
		l.Credentials = base.Credentials
	}
	if l.HostBase == "" {
		l.HostBase = base.HostBase
	}
	if l.Body == 0 {
		l.Body = base.Body
	}
	if l.Rate == 0 {
		l.Rate = base.Rate
	}
	if l.Pool == 0 {
		l.Pool = base.Pool
	}
	return l
}
