package cli

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/agentbox/agentbox/sandbox"
)

// CeilingFlags are the flags with which an operator fixes the policy of
// sessions that someone else (a model, an MCP client) asks for: the same
// network, limit and --ro flags as exec, and a per-command timeout. A
// command that serves others (agentbox mcp) composes them.
type CeilingFlags struct {
	exec    execFlags
	timeout time.Duration
	Backend string
	Server  string
	Verbose bool
}

// Register adds the flags to fl.
func (c *CeilingFlags) Register(fl *pflag.FlagSet) {
	f := &c.exec
	fl.StringVar(&f.network, "network", "none", "`none|HOST[,HOST...]`: no network, or at most these hosts through the egress proxy (*.example.com for subdomains)")
	f.inspectionFlags(fl)
	fl.StringVar(&f.memory, "memory", "1G", "memory limit of each sandbox (`SIZE` like 512M; 0 for none)")
	fl.Int64Var(&f.pids, "pids", 512, "limit on processes and threads of each sandbox (`N`; 0 for none)")
	fl.Float64Var(&f.cpus, "cpus", 0, "CPU limit of each sandbox in cores (`N`, e.g. 1.5; 0 for none)")
	fl.DurationVar(&c.timeout, "timeout", 10*time.Minute, "wall-clock limit of each command (`DURATION`; 0 for none)")
	fl.StringArrayVar(&f.ro, "ro", nil, "offer host `HOST[:DEST]` read-only to every sandbox (DEST defaults to /workspace/<name>; repeatable)")
	fl.BoolVar(&f.allowWeaker, "allow-weaker", false, "run even if the backend cannot enforce parts of the policy (each is logged)")
	fl.StringVar(&f.image, "image", "", "root filesystem image (docker backend)")
	fl.StringVar(&c.Backend, "backend", "linux", "sandbox backend: linux (native isolation), docker, remote (an agentbox serve; see --server), or local (confines NOTHING; development only)")
	fl.StringVar(&c.Server, "server", "", "the agentbox serve `ADDR` of --backend remote: http(s)://HOST:PORT or unix:PATH (default $AGENTBOX_SERVER; the API key is $AGENTBOX_TOKEN)")
	fl.BoolVarP(&c.Verbose, "verbose", "v", false, "log what the server and the backend do (on stderr)")
}

// ceilingKeys are the flags that override a policy file's values.
var ceilingKeys = []string{"network", "inspect", "rule", "credential", "memory", "pids", "cpus", "timeout"}

// Ceiling is the operator's policy: base (a policy file's, or nil) with
// the flags given on the command line over it, or the flags' values with
// their defaults when there is no base. Mounts are the --ro ones.
func (c *CeilingFlags) Ceiling(fl *pflag.FlagSet, base *sandbox.Policy) (sandbox.Policy, []sandbox.Mount, bool, error) {
	if c.timeout < 0 {
		return sandbox.Policy{}, nil, false, fmt.Errorf("--timeout %s: must be positive (0 means none)", c.timeout)
	}
	spec, err := c.exec.buildSpec()
	if err != nil {
		return sandbox.Policy{}, nil, false, err
	}
	spec.Policy.Resources.ExecTimeout = c.timeout
	if base == nil {
		return spec.Policy, spec.Mounts, c.exec.allowWeaker, nil
	}
	pol, from := *base, spec.Policy
	for _, k := range ceilingKeys {
		if !fl.Changed(k) {
			continue
		}
		switch k {
		case "network":
			pol.Network.Mode, pol.Network.Allow = from.Network.Mode, from.Network.Allow
		case "inspect":
			pol.Network.Inspect = from.Network.Inspect
		case "rule":
			pol.Network.Rules = from.Network.Rules
		case "credential":
			pol.Network.Secrets = from.Network.Secrets
		case "memory":
			pol.Resources.MemoryBytes = from.Resources.MemoryBytes
		case "pids":
			pol.Resources.Pids = from.Resources.Pids
		case "cpus":
			pol.Resources.CPUs = from.Resources.CPUs
		case "timeout":
			pol.Resources.ExecTimeout = from.Resources.ExecTimeout
		}
	}
	return pol, spec.Mounts, c.exec.allowWeaker, pol.Validate()
}

// BackendOptions are the options the backend is opened with; logs go to
// stderr (a server may own stdout).
func (c *CeilingFlags) BackendOptions(snapshots sandbox.SnapshotStore) BackendOptions {
	bo := stderrBackendOptions(c.Verbose, c.exec.image, c.Server)
	bo.Snapshots = snapshots
	return bo
}

// KeepSession registers a detached session that another command made
// (agentbox mcp --keep) where `agentbox session ls`, `exec --session` and
// `session rm` find it; `session rm` also removes workspace, the
// temporary directory a manifest was written into ("" if none).
func KeepSession(st sandbox.State, workspace string) error {
	return saveSession(sessionEntry{State: st, TempWorkspace: workspace})
}
