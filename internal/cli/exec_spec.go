package cli

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/agentbox/agentbox/internal/bytesize"
	"github.com/agentbox/agentbox/internal/toolcache"
	"github.com/agentbox/agentbox/sandbox"
)

// execFlags are the flags of `agentbox exec` that shape the sandbox.
type execFlags struct {
	workspace   string
	ro, rw, env []string
	network     string
	inspect     []string
	rules       []string
	credentials []string
	memory      string
	disk        string
	pids        int64
	cpus        float64
	user        string
	allowWeaker bool
	image       string
	caches      []string
}

// buildSpec turns flags into a Spec and checks everything that can be
// checked before anything is started, so bad input leaves nothing behind.
func (f *execFlags) buildSpec() (sandbox.Spec, error) {
	spec := sandbox.Spec{
		Workdir:     sandbox.DefaultWorkdir,
		Env:         map[string]string{},
		User:        f.user,
		AllowWeaker: f.allowWeaker,
		Image:       f.image,
	}
	if f.workspace != "" {
		abs, err := filepath.Abs(f.workspace)
		if err != nil {
			return spec, fmt.Errorf("--workspace %s: %w", f.workspace, err)
		}
		fi, err := os.Stat(abs)
		if err != nil {
			return spec, fmt.Errorf("--workspace %s: %w", f.workspace, err)
		}
		if !fi.IsDir() {
			return spec, fmt.Errorf("--workspace %s: not a directory", f.workspace)
		}
		spec.Workspace = abs
	}
	for _, kv := range f.env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.ContainsAny(k, "\x00") {
			return spec, fmt.Errorf("--env %q: want KEY=VALUE", kv)
		}
		spec.Env[k] = v
	}
	for _, m := range f.ro {
		mnt, err := parseMount(m, true, spec.Workdir)
		if err != nil {
			return spec, fmt.Errorf("--ro %s: %w", m, err)
		}
		spec.Mounts = append(spec.Mounts, mnt)
	}
	for _, m := range f.rw {
		mnt, err := parseMount(m, false, spec.Workdir)
		if err != nil {
			return spec, fmt.Errorf("--rw %s: %w", m, err)
		}
		spec.Mounts = append(spec.Mounts, mnt)
	}
	seen := map[string]bool{}
	for _, m := range spec.Mounts {
		if seen[m.Target] {
			return spec, fmt.Errorf("two mounts on %s", m.Target)
		}
		seen[m.Target] = true
	}
	net, err := parseNetwork(f.network)
	if err != nil {
		return spec, fmt.Errorf("--network %s: %w", f.network, err)
	}
	if err := f.addInspection(&net); err != nil {
		return spec, err
	}
	spec.Policy.Network = net
	r := &spec.Policy.Resources
	if f.memory != "" && f.memory != "0" {
		if r.MemoryBytes, err = bytesize.Parse(f.memory); err != nil {
			return spec, fmt.Errorf("--memory: %w", err)
		}
	}
	if f.disk != "" && f.disk != "0" {
		if r.DiskBytes, err = bytesize.Parse(f.disk); err != nil {
			return spec, fmt.Errorf("--disk: %w", err)
		}
	}
	if f.pids < 0 {
		return spec, fmt.Errorf("--pids %d: must be positive (0 means no limit)", f.pids)
	}
	r.Pids = f.pids
	if f.cpus < 0 {
		return spec, fmt.Errorf("--cpus %g: must be positive (0 means no limit)", f.cpus)
	}
	r.CPUs = f.cpus
	if f.user != "" {
		if err := checkUser(f.user); err != nil {
			return spec, fmt.Errorf("--user %s: %w", f.user, err)
		}
	}
	if err := spec.Policy.Validate(); err != nil {
		return spec, err
	}
	// Last: it makes the caches' host directories, which outlive the
	// command by design.
	if len(f.caches) > 0 {
		if err := toolcache.Apply(&spec, toolcache.Dir(), f.caches); err != nil {
			return spec, fmt.Errorf("--cache: %w", err)
		}
	}
	return spec, nil
}

// parseMount reads HOST[:DEST]. DEST defaults to the host directory's name
// under the workspace; a relative DEST is taken from the workspace.
func parseMount(s string, readOnly bool, workdir string) (sandbox.Mount, error) {
	host, dest, _ := strings.Cut(s, ":")
	if host == "" {
		return sandbox.Mount{}, fmt.Errorf("want HOST[:DEST]")
	}
	abs, err := filepath.Abs(host)
	if err != nil {
		return sandbox.Mount{}, err
	}
	if _, err := os.Stat(abs); err != nil {
		return sandbox.Mount{}, err
	}
	if dest == "" {
		dest = filepath.Base(abs)
	}
	if !path.IsAbs(dest) {
		dest = path.Join(workdir, dest)
	}
	dest = path.Clean(dest)
	if err := sandbox.ValidateMountTarget(workdir, dest); err != nil {
		return sandbox.Mount{}, err
	}
	return sandbox.Mount{Source: abs, Target: dest, ReadOnly: readOnly}, nil
}

// addInspection adds --inspect, --rule and --credential to net.
func (f *execFlags) addInspection(net *sandbox.NetworkPolicy) error {
	// Policy.Validate refuses them without an allow-list, or for hosts
	// it does not admit (the list may come from a policy file).
	net.Inspect = append(net.Inspect, f.inspect...)
	for _, r := range f.rules {
		rule, err := sandbox.ParseRequestRule(r)
		if err != nil {
			return fmt.Errorf("--rule: %w", err)
		}
		net.Rules = append(net.Rules, rule)
	}
	for _, c := range f.credentials {
		cred, err := sandbox.ParseCredential(c)
		if err != nil {
			return fmt.Errorf("--credential: %w", err)
		}
		net.Secrets = append(net.Secrets, cred)
	}
	return nil
}

// inspectionFlags registers --inspect, --rule and --credential.
func (f *execFlags) inspectionFlags(fl *pflag.FlagSet) {
	fl.StringArrayVar(&f.inspect, "inspect", nil, "terminate the HTTPS of allowed `HOST` at the egress proxy (a per-session CA the sandbox trusts), so rules and credentials apply to it; hosts named by --rule or --credential are inspected anyway (repeatable)")
	fl.StringArrayVar(&f.rules, "rule", nil, "admit only matching requests to an allowed host: `\"METHODS HOST[/PATH-GLOB]\"`, e.g. \"GET,HEAD api.github.com/repos/acme/**\" (* any method; ** any path below; repeatable; refusals are 403 and violations)")
	fl.StringArrayVar(&f.credentials, "credential", nil, "add a secret outside the sandbox: `HOST[/PREFIX]=KIND:SOURCE`, KIND bearer, basic, header:NAME or placeholder:ENVVAR (the sandbox sees ENVVAR=agentbox-ph-..., swapped for the secret toward HOST only), SOURCE env:NAME, file:PATH or cmd:COMMAND (repeatable)")
}

// parseNetwork reads "none", "host" or a comma-separated allow-list.
func parseNetwork(s string) (sandbox.NetworkPolicy, error) {
	switch s {
	case "", "none":
		return sandbox.NetworkPolicy{Mode: sandbox.NetworkNone}, nil
	case "host":
		return sandbox.NetworkPolicy{Mode: sandbox.NetworkHost}, nil
	}
	var allow []string
	for _, h := range strings.Split(s, ",") {
		h = strings.TrimSpace(h)
		switch h {
		case "":
			continue
		case "none", "host":
			return sandbox.NetworkPolicy{}, fmt.Errorf("%q cannot be combined with an allow-list", h)
		}
		if err := sandbox.ValidateHostPattern(h); err != nil {
			return sandbox.NetworkPolicy{}, err
		}
		allow = append(allow, h)
	}
	if len(allow) == 0 {
		return sandbox.NetworkPolicy{}, fmt.Errorf("empty allow-list")
	}
	return sandbox.NetworkPolicy{Mode: sandbox.NetworkAllowList, Allow: allow}, nil
}

// checkUser accepts "uid" or "uid:gid".
func checkUser(s string) error {
	uid, gid, hasGID := strings.Cut(s, ":")
	if _, err := strconv.ParseUint(uid, 10, 32); err != nil {
		return fmt.Errorf("want a numeric uid[:gid]")
	}
	if hasGID {
		if _, err := strconv.ParseUint(gid, 10, 32); err != nil {
			return fmt.Errorf("want a numeric uid[:gid]")
		}
	}
	return nil
}
