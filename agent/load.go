package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/agentbox/agentbox/agent/model"
	"github.com/agentbox/agentbox/internal/bytesize"
	"github.com/agentbox/agentbox/internal/didyoumean"
	"github.com/agentbox/agentbox/internal/toolcache"
	"github.com/agentbox/agentbox/manifest"
	"github.com/agentbox/agentbox/sandbox"
)

// File is an agent file (agent.yaml) as loaded: the agent (without its
// model, which the caller builds from Model), and what a run of it needs.
type File struct {
	// Path is the file's path; Dir is its directory, against which every
	// relative path in it (manifest, plan, skills, artifacts) resolves.
	Path string
	Dir  string
	// Agent has everything but Model set.
	Agent *SandboxAgent
	// ManifestBase is the trusted directory the manifest's host sources
	// resolve under: the manifest file's directory, or Dir for an inline
	// manifest. Pass it as SandboxConfig.ManifestBase.
	ManifestBase string
	// Model says which provider to build.
	Model ModelConfig
	// Policy is the sandbox policy to run under.
	Policy sandbox.Policy
	// Approvals are the rules that need approval.
	Approvals []ApprovalRule
	// Artifacts, when Rules is set, says what to promote after the run.
	Artifacts ArtifactsConfig
	// Caches name the tool caches (go, pip, npm: internal/toolcache) the
	// run's session gets, kept between the sessions of the user.
	Caches []string
	// Redact are regular expressions whose matches the run's trace hides,
	// beyond trace.DefaultPatterns (checked to compile).
	Redact []string
}

// ModelConfig names a model provider and its options.
type ModelConfig struct {
	// Provider is openai-responses, openai-chat or scripted.
	Provider string `yaml:"provider"`
	// Name is the model's name ("gpt-4.1").
	Name string `yaml:"name"`
	// BaseURL is the server's base URL (Ollama, vLLM, llama.cpp...).
	BaseURL string `yaml:"base_url"`
	// Plan is the scripted provider's plan file (resolved against the
	// agent file's directory).
	Plan string `yaml:"plan"`
}

// ArtifactsConfig says which outputs to promote after a run.
type ArtifactsConfig struct {
	// Rules is the artifact rules file (resolved against the agent file).
	Rules string `yaml:"rules"`
	// To is the destination directory (resolved against the agent file).
	To string `yaml:"to"`
}

// Providers are the model provider names an agent file may use.
var Providers = []string{"openai-responses", "openai-chat", "scripted"}

type fileYAML struct {
	Name             string          `yaml:"name"`
	Instructions     string          `yaml:"instructions"`
	BaseInstructions string          `yaml:"base_instructions"`
	Manifest         yaml.Node       `yaml:"manifest"`
	Capabilities     []yaml.Node     `yaml:"capabilities"`
	Model            ModelConfig     `yaml:"model"`
	Settings         settingsYAML    `yaml:"settings"`
	MaxTurns         int             `yaml:"max_turns"`
	RunAs            string          `yaml:"run_as"`
	Policy           PolicySpec      `yaml:"policy"`
	Approvals        []approvalYAML  `yaml:"approvals"`
	Artifacts        ArtifactsConfig `yaml:"artifacts"`
	Redact           []string        `yaml:"redact"`
	Caches           []string        `yaml:"caches"`
	MCPServers       []mcpServerYAML `yaml:"mcp_servers"`
}

type mcpServerYAML struct {
	Name    string            `yaml:"name"`
	Command []string          `yaml:"command"`
	Env     map[string]string `yaml:"env"`
	URL     string            `yaml:"url"`
}

type settingsYAML struct {
	Temperature     *float64 `yaml:"temperature"`
	TopP            *float64 `yaml:"top_p"`
	MaxOutputTokens int64    `yaml:"max_output_tokens"`
	ToolChoice      string   `yaml:"tool_choice"`
	Store           *bool    `yaml:"store"`
}

// PolicySpec is a sandbox policy as files write it (an agent file's
// policy key, the operator's file of agentbox mcp): sizes like 512M,
// durations like 30s, network "none", "host" or a list of hosts.
type PolicySpec struct {
	// Network is "none", "host", a list of allowed hosts, or a mapping:
	// allow (the hosts), inspect (hosts whose HTTPS the egress proxy
	// terminates), rules ("GET,HEAD api.github.com/repos/acme/**") and
	// credentials ("api.openai.com=placeholder:OPENAI_API_KEY:env:KEY").
	Network        yaml.Node `yaml:"network"`
	Memory         string    `yaml:"memory"`
	Pids           int64     `yaml:"pids"`
	CPUs           float64   `yaml:"cpus"`
	Timeout        string    `yaml:"timeout"`
	SessionTimeout string    `yaml:"session_timeout"`
	Disk           string    `yaml:"disk"`
	Output         string    `yaml:"output"`
	ReadOnly       []string  `yaml:"read_only"`
	Deny           []string  `yaml:"deny"`
}

type approvalYAML struct {
	Tool  string `yaml:"tool"`
	Match string `yaml:"match"`
}

// LoadFile reads an agent file strictly: unknown keys, unknown
// capabilities or providers and malformed values are errors that name
// the file (and the line, when YAML knows it).
func LoadFile(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, sandbox.Wrap("agent: read agent file "+path, sandbox.ErrNotFound, err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("agent: %s: %w", path, err)
	}
	f, err := ParseFile(data, filepath.Dir(abs))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	f.Path = abs
	return f, nil
}

// ParseFile decodes an agent file's YAML; dir is where relative paths in
// it resolve. It reports every problem it finds at once, one per line,
// each with its line and key: an unknown key names the nearest known one.
func ParseFile(data []byte, dir string) (*File, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "agent file: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "agent file is empty")
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "agent file: line %d: the file must be a mapping of keys (name, instructions, model, ...)", root.Line)
	}
	ps := &problems{}
	unknownKeys(root, reflect.TypeOf(fileYAML{}), "", ps)
	var y fileYAML
	if err := root.Decode(&y); err != nil {
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			return nil, sandbox.Errorf(sandbox.ErrInvalid, "agent file: %s", strings.TrimPrefix(err.Error(), "yaml: "))
		}
		// Each is already "line N: cannot unmarshal ...".
		for _, e := range te.Errors {
			ps.list = append(ps.list, "agent file: "+e)
		}
	}
	line := func(keys ...string) int { return keyLine(root, keys...) }
	f := &File{Dir: dir, Model: y.Model, Artifacts: y.Artifacts, Redact: y.Redact, Caches: y.Caches}
	for _, c := range y.Caches {
		if !contains(toolcache.Names(), c) {
			ps.add(line("caches"), "caches: %q is not one of %s%s", c, strings.Join(toolcache.Names(), ", "), suggest(c, toolcache.Names()))
		}
	}
	a := &SandboxAgent{
		Name:             y.Name,
		Instructions:     y.Instructions,
		BaseInstructions: y.BaseInstructions,
		MaxTurns:         y.MaxTurns,
		RunAs:            y.RunAs,
		Settings: model.Settings{
			Model:           y.Model.Name,
			Temperature:     y.Settings.Temperature,
			TopP:            y.Settings.TopP,
			MaxOutputTokens: y.Settings.MaxOutputTokens,
			ToolChoice:      y.Settings.ToolChoice,
			Store:           y.Settings.Store,
		},
	}
	f.Agent = a
	if a.Name == "" {
		ps.add(0, "name is required")
	}
	if a.MaxTurns < 0 {
		ps.add(line("max_turns"), "max_turns is negative")
	}
	switch y.Settings.ToolChoice {
	case "", "auto", "required", "none":
	default:
		ps.add(line("settings", "tool_choice"), "settings.tool_choice %q is not auto, required or none", y.Settings.ToolChoice)
	}
	if f.Model.Provider != "" && !contains(Providers, f.Model.Provider) {
		ps.add(line("model", "provider"), "model.provider %q is not one of %s%s", f.Model.Provider, strings.Join(Providers, ", "), suggest(f.Model.Provider, Providers))
	}
	f.Model.Plan = resolve(dir, f.Model.Plan)
	f.Artifacts.Rules = resolve(dir, f.Artifacts.Rules)
	f.Artifacts.To = resolve(dir, f.Artifacts.To)
	if f.Artifacts.To != "" && f.Artifacts.Rules == "" {
		ps.add(line("artifacts", "to"), "artifacts.to needs artifacts.rules")
	}

	m, err := loadManifest(&y.Manifest, dir)
	if err != nil {
		ps.list = append(ps.list, err.Error())
	}
	a.Manifest = m
	f.ManifestBase = dir
	if y.Manifest.Kind == yaml.ScalarNode && y.Manifest.Value != "" {
		f.ManifestBase = filepath.Dir(resolve(dir, y.Manifest.Value))
	}

	a.Capabilities = parseCapabilities(y.Capabilities, dir, ps)
	f.Policy = y.Policy.policy(func(keys ...string) int { return line(append([]string{"policy"}, keys...)...) }, ps)
	if len(y.MCPServers) > 0 {
		servers := &MCPServers{}
		for i, m := range y.MCPServers {
			at := 0
			if n := childNode(root, "mcp_servers"); n != nil && n.Kind == yaml.SequenceNode && i < len(n.Content) {
				at = n.Content[i].Line
			}
			switch {
			case !mcpName.MatchString(m.Name):
				ps.add(at, "mcp_servers[%d].name %q must be 1-32 letters, digits, _ or - (it prefixes the server's tool names)", i, m.Name)
			case (len(m.Command) == 0) == (m.URL == ""):
				ps.add(at, "mcp_servers[%d] (%s) needs a command (a program speaking MCP on stdio) or a url (streamable HTTP), not both", i, m.Name)
			}
			servers.Servers = append(servers.Servers, MCPServer{Name: m.Name, Command: m.Command, Dir: dir, Env: m.Env, URL: m.URL})
		}
		if a.Capabilities == nil {
			a.Capabilities = DefaultCapabilities()
		}
		a.Capabilities = append(a.Capabilities, servers)
	}
	for i, p := range y.Redact {
		if _, err := regexp.Compile(p); err != nil {
			ps.add(line("redact"), "redact[%d]: %v", i, err)
		}
	}
	for i, r := range y.Approvals {
		at := 0
		if n := childNode(root, "approvals"); n != nil && n.Kind == yaml.SequenceNode && i < len(n.Content) {
			at = n.Content[i].Line
		}
		rule := ApprovalRule{Tool: r.Tool}
		if r.Match != "" {
			re, err := regexp.Compile(r.Match)
			if err != nil {
				ps.add(at, "approvals[%d].match: %v", i, err)
			}
			rule.Match = re
		}
		if r.Tool == "" && r.Match == "" {
			ps.add(at, "approvals[%d] needs a tool or a match (use tool: \"*\" to approve every call)", i)
		}
		f.Approvals = append(f.Approvals, rule)
	}
	if err := ps.err(); err != nil {
		return nil, err
	}
	return f, nil
}

// loadManifest takes the manifest key: a path (resolved against dir) or an
// inline mapping.
func loadManifest(n *yaml.Node, dir string) (*manifest.Manifest, error) {
	switch n.Kind {
	case 0:
		return nil, nil
	case yaml.ScalarNode:
		if n.Value == "" {
			return nil, nil
		}
		m, err := manifest.Load(resolve(dir, n.Value))
		if err != nil {
			return nil, fmt.Errorf("agent file: line %d: manifest: %w", n.Line, err)
		}
		return m, nil
	case yaml.MappingNode:
		raw, err := yaml.Marshal(n)
		if err != nil {
			return nil, fmt.Errorf("agent file: line %d: manifest: %w", n.Line, err)
		}
		m, err := manifest.ParseYAML(raw)
		if err != nil {
			return nil, fmt.Errorf("agent file: inline manifest at line %d (its line numbers count from there): %w", n.Line, err)
		}
		return m, nil
	}
	return nil, sandbox.Errorf(sandbox.ErrInvalid, "agent file: line %d: manifest must be a path or a mapping", n.Line)
}

// parseCapabilities reads the capabilities list: each item a name, or a
// one-key mapping from name to options. Problems go to ps.
func parseCapabilities(nodes []yaml.Node, dir string, ps *problems) []Capability {
	if nodes == nil {
		return nil
	}
	caps := []Capability{}
	seen := map[string]bool{}
	for _, n := range nodes {
		name, opts := "", (*yaml.Node)(nil)
		switch n.Kind {
		case yaml.ScalarNode:
			name = n.Value
		case yaml.MappingNode:
			if len(n.Content) != 2 {
				ps.add(n.Line, "a capability is a name or a single \"name: {options}\"")
				continue
			}
			name, opts = n.Content[0].Value, n.Content[1]
		default:
			ps.add(n.Line, "a capability is a name or a single \"name: {options}\"")
			continue
		}
		if seen[name] {
			ps.add(n.Line, "capability %q is listed twice", name)
			continue
		}
		seen[name] = true
		c, err := newCapability(name, opts, dir)
		if err != nil {
			ps.add(n.Line, "capability %s: %v", name, err)
			continue
		}
		caps = append(caps, c)
	}
	return caps
}

// decodeOpts decodes a capability's options strictly: a key that is not
// one of v's yaml tags is an error naming the known ones and its line.
func decodeOpts(opts *yaml.Node, v any) error {
	if opts == nil || opts.Kind == yaml.ScalarNode && opts.Value == "" {
		return nil
	}
	if opts.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: options must be a mapping", opts.Line)
	}
	known := map[string]bool{}
	var names []string
	rt := reflect.TypeOf(v).Elem()
	for i := range rt.NumField() {
		tag, _, _ := strings.Cut(rt.Field(i).Tag.Get("yaml"), ",")
		known[tag] = true
		names = append(names, tag)
	}
	for i := 0; i+1 < len(opts.Content); i += 2 {
		if k := opts.Content[i]; !known[k.Value] {
			return fmt.Errorf("line %d: unknown option %q%s (known: %s)", k.Line, k.Value, suggest(k.Value, names), strings.Join(names, ", "))
		}
	}
	if err := opts.Decode(v); err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), "yaml: "))
	}
	return nil
}

func newCapability(name string, opts *yaml.Node, dir string) (Capability, error) {
	switch name {
	case "shell":
		var o struct {
			Timeout      string `yaml:"timeout"`
			MaxTimeout   string `yaml:"max_timeout"`
			MaxProcesses int    `yaml:"max_processes"`
		}
		if err := decodeOpts(opts, &o); err != nil {
			return nil, err
		}
		s := &Shell{MaxProcesses: o.MaxProcesses}
		var err error
		if s.Timeout, err = parseDuration("timeout", o.Timeout); err != nil {
			return nil, err
		}
		if s.MaxTimeout, err = parseDuration("max_timeout", o.MaxTimeout); err != nil {
			return nil, err
		}
		return s, nil
	case "filesystem":
		var o struct {
			MaxReadLines int    `yaml:"max_read_lines"`
			MaxReadFile  string `yaml:"max_read_file"`
			MaxImage     string `yaml:"max_image"`
		}
		if err := decodeOpts(opts, &o); err != nil {
			return nil, err
		}
		f := &Filesystem{MaxReadLines: o.MaxReadLines}
		if o.MaxReadFile != "" {
			n, err := bytesize.Parse(o.MaxReadFile)
			if err != nil {
				return nil, fmt.Errorf("max_read_file: %w", err)
			}
			f.MaxReadFileBytes = n
		}
		if o.MaxImage != "" {
			n, err := bytesize.Parse(o.MaxImage)
			if err != nil {
				return nil, fmt.Errorf("max_image: %w", err)
			}
			f.MaxImageBytes = int(n)
		}
		return f, nil
	case "skills":
		var o struct {
			Dir string `yaml:"dir"`
		}
		if err := decodeOpts(opts, &o); err != nil {
			return nil, err
		}
		if o.Dir == "" {
			return nil, errors.New("dir is required")
		}
		s := &Skills{Dir: resolve(dir, o.Dir)}
		if _, err := s.Index(); err != nil {
			return nil, err
		}
		return s, nil
	case "compaction":
		var o struct {
			MaxBytes  string `yaml:"max_bytes"`
			MaxTokens int    `yaml:"max_tokens"`
			KeepLast  int    `yaml:"keep_last"`
		}
		if err := decodeOpts(opts, &o); err != nil {
			return nil, err
		}
		c := &Compaction{MaxTokens: o.MaxTokens, KeepLast: o.KeepLast}
		if o.MaxBytes != "" {
			n, err := bytesize.Parse(o.MaxBytes)
			if err != nil {
				return nil, fmt.Errorf("max_bytes: %w", err)
			}
			c.MaxBytes = int(n)
		}
		return c, nil
	}
	known := []string{"shell", "filesystem", "skills", "compaction"}
	return nil, fmt.Errorf("unknown capability%s (known: %s)", suggest(name, known), strings.Join(known, ", "))
}

// Policy is the policy p describes, validated; each problem is reported,
// prefixed with what (the file it comes from).
func (p PolicySpec) Policy(what string) (sandbox.Policy, error) {
	ps := problems{prefix: what + ": "}
	pol := p.policy(func(...string) int { return 0 }, &ps)
	return pol, ps.err()
}

// policy is the sandbox policy p describes; line finds a policy key's
// line, and problems go to ps.
func (p PolicySpec) policy(line func(keys ...string) int, ps *problems) sandbox.Policy {
	var pol sandbox.Policy
	switch p.Network.Kind {
	case 0:
	case yaml.ScalarNode:
		switch p.Network.Value {
		case "none", "":
			pol.Network.Mode = sandbox.NetworkNone
		case "host":
			pol.Network.Mode = sandbox.NetworkHost
		default:
			ps.add(p.Network.Line, "policy.network is none, host, or a list of allowed hosts")
		}
	case yaml.SequenceNode:
		var hosts []string
		if err := p.Network.Decode(&hosts); err != nil {
			ps.add(p.Network.Line, "policy.network: %v", err)
		}
		pol.Network = sandbox.NetworkPolicy{Mode: sandbox.NetworkAllowList, Allow: hosts}
	case yaml.MappingNode:
		pol.Network = networkMapping(&p.Network, ps)
	default:
		ps.add(p.Network.Line, "policy.network is none, host, a list of allowed hosts, or a mapping with allow (and inspect, rules, credentials)")
	}
	r := &pol.Resources
	for _, s := range []struct {
		key string
		val string
		dst *int64
	}{{"memory", p.Memory, &r.MemoryBytes}, {"disk", p.Disk, &r.DiskBytes}, {"output", p.Output, &r.OutputBytes}} {
		if s.val == "" {
			continue
		}
		n, err := bytesize.Parse(s.val)
		if err != nil {
			ps.add(line(s.key), "policy.%s: %v", s.key, err)
			continue
		}
		*s.dst = n
	}
	r.Pids, r.CPUs = p.Pids, p.CPUs
	var err error
	if r.ExecTimeout, err = parseDuration("policy.timeout", p.Timeout); err != nil {
		ps.add(line("timeout"), "%v", err)
	}
	if r.SessionTimeout, err = parseDuration("policy.session_timeout", p.SessionTimeout); err != nil {
		ps.add(line("session_timeout"), "%v", err)
	}
	pol.Filesystem.ReadOnly, pol.Filesystem.Deny = p.ReadOnly, p.Deny
	if err := pol.Validate(); err != nil {
		ps.add(line(), "%v", err)
	}
	return pol
}

func parseDuration(key, s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, sandbox.Errorf(sandbox.ErrInvalid, "%s: %q is not a duration such as 30s or 5m", key, s)
	}
	return d, nil
}

func resolve(dir, p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// problems collects what is wrong with an agent file, so that a user
// fixes them all at once, as a manifest's ValidationError allows.
type problems struct {
	list []string
	// prefix names the file in each problem; default "agent file: ".
	prefix string
}

// add records one problem at line (0 when it has none).
func (ps *problems) add(line int, format string, args ...any) {
	at := ""
	if line > 0 {
		at = fmt.Sprintf("line %d: ", line)
	}
	prefix := ps.prefix
	if prefix == "" {
		prefix = "agent file: "
	}
	ps.list = append(ps.list, prefix+at+fmt.Sprintf(format, args...))
}

func (ps *problems) err() error {
	if len(ps.list) == 0 {
		return nil
	}
	return sandbox.Errorf(sandbox.ErrInvalid, "%s", strings.Join(ps.list, "\n"))
}

// unknownKeys adds a problem for every key of the mapping n, and of the
// mappings under it, that the struct type t has no yaml tag for: it names
// the key's full path (policy.timout), its line and the nearest known key.
// Keys decoded into a yaml.Node are checked where they are read.
func unknownKeys(n *yaml.Node, t reflect.Type, path string, ps *problems) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == reflect.TypeOf(yaml.Node{}):
	case t.Kind() == reflect.Struct && n.Kind == yaml.MappingNode:
		fields := map[string]reflect.Type{}
		var names []string
		for i := range t.NumField() {
			tag, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
			if tag != "" && tag != "-" {
				fields[tag] = t.Field(i).Type
				names = append(names, tag)
			}
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			key := k.Value
			if path != "" {
				key = path + "." + k.Value
			}
			ft, ok := fields[k.Value]
			if !ok {
				if near := didyoumean.Nearest(k.Value, names); near != "" {
					ps.add(k.Line, "unknown key %s; did you mean %s?", key, near)
				} else {
					ps.add(k.Line, "unknown key %s (known here: %s)", key, strings.Join(names, ", "))
				}
				continue
			}
			unknownKeys(v, ft, key, ps)
		}
	case t.Kind() == reflect.Slice && n.Kind == yaml.SequenceNode:
		for i, c := range n.Content {
			unknownKeys(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i), ps)
		}
	}
}

// childNode is the value of key in the mapping n, or nil.
func childNode(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// keyLine is the line of the key at the path keys under the mapping n
// (of n itself for no keys), or of the deepest one found; 0 if none.
func keyLine(n *yaml.Node, keys ...string) int {
	line := 0
	if len(keys) == 0 {
		return n.Line
	}
	for _, k := range keys {
		if n == nil || n.Kind != yaml.MappingNode {
			return line
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				line, next = n.Content[i].Line, n.Content[i+1]
				break
			}
		}
		if next == nil {
			return line
		}
		n = next
	}
	return line
}

// suggest is "; did you mean X?" for the name in names nearest to s, or "".
func suggest(s string, names []string) string {
	if near := didyoumean.Nearest(s, names); near != "" && near != s {
		return fmt.Sprintf("; did you mean %q?", near)
	}
	return ""
}

// networkYAML is the mapping form of policy.network.
type networkYAML struct {
	Allow       []string `yaml:"allow"`
	Inspect     []string `yaml:"inspect"`
	Rules       []string `yaml:"rules"`
	Credentials []string `yaml:"credentials"`
}

// networkMapping reads the mapping form of policy.network: an allow-list
// with the hosts to inspect, request rules and credentials, each in the
// syntax of the matching exec flag.
func networkMapping(n *yaml.Node, ps *problems) sandbox.NetworkPolicy {
	for i := 0; i+1 < len(n.Content); i += 2 {
		switch k := n.Content[i]; k.Value {
		case "allow", "inspect", "rules", "credentials":
		default:
			ps.add(k.Line, "policy.network: unknown key %q (want allow, inspect, rules, credentials)", k.Value)
		}
	}
	var y networkYAML
	if err := n.Decode(&y); err != nil {
		ps.add(n.Line, "policy.network: %v", err)
		return sandbox.NetworkPolicy{}
	}
	if len(y.Allow) == 0 {
		ps.add(n.Line, "policy.network.allow lists no host")
	}
	out := sandbox.NetworkPolicy{Mode: sandbox.NetworkAllowList, Allow: y.Allow, Inspect: y.Inspect}
	for _, s := range y.Rules {
		r, err := sandbox.ParseRequestRule(s)
		if err != nil {
			ps.add(n.Line, "policy.network.rules: %v", err)
			continue
		}
		out.Rules = append(out.Rules, r)
	}
	for _, s := range y.Credentials {
		c, err := sandbox.ParseCredential(s)
		if err != nil {
			ps.add(n.Line, "policy.network.credentials: %v", err)
			continue
		}
		out.Secrets = append(out.Secrets, c)
	}
	if err := (sandbox.Policy{Network: out}).Validate(); err != nil && len(y.Allow) > 0 {
		ps.add(n.Line, "policy.network: %v", err)
	}
	return out
}
