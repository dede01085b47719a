package agent

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/agentbox/agentbox/agent/model"
	"github.com/agentbox/agentbox/internal/bytesize"
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
	Policy           policyYAML      `yaml:"policy"`
	Approvals        []approvalYAML  `yaml:"approvals"`
	Artifacts        ArtifactsConfig `yaml:"artifacts"`
}

type settingsYAML struct {
	Temperature     *float64 `yaml:"temperature"`
	TopP            *float64 `yaml:"top_p"`
	MaxOutputTokens int64    `yaml:"max_output_tokens"`
	ToolChoice      string   `yaml:"tool_choice"`
	Store           *bool    `yaml:"store"`
}

type policyYAML struct {
	// Network is "none", "host", or a list of allowed hosts.
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
// it resolve.
func ParseFile(data []byte, dir string) (*File, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var y fileYAML
	if err := dec.Decode(&y); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, sandbox.Errorf(sandbox.ErrInvalid, "agent file is empty")
		}
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "agent file: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	f := &File{Dir: dir, Model: y.Model, Artifacts: y.Artifacts}
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
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "agent file: name is required")
	}
	if a.MaxTurns < 0 {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "agent file: max_turns is negative")
	}
	switch y.Settings.ToolChoice {
	case "", "auto", "required", "none":
	default:
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "agent file: settings.tool_choice %q is not auto, required or none", y.Settings.ToolChoice)
	}
	if f.Model.Provider != "" && !contains(Providers, f.Model.Provider) {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "agent file: line %d: model.provider %q is not one of %s", lineOf(data, "provider:"), f.Model.Provider, strings.Join(Providers, ", "))
	}
	f.Model.Plan = resolve(dir, f.Model.Plan)
	f.Artifacts.Rules = resolve(dir, f.Artifacts.Rules)
	f.Artifacts.To = resolve(dir, f.Artifacts.To)
	if f.Artifacts.To != "" && f.Artifacts.Rules == "" {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "agent file: artifacts.to needs artifacts.rules")
	}

	m, err := loadManifest(&y.Manifest, dir)
	if err != nil {
		return nil, err
	}
	a.Manifest = m
	f.ManifestBase = dir
	if y.Manifest.Kind == yaml.ScalarNode && y.Manifest.Value != "" {
		f.ManifestBase = filepath.Dir(resolve(dir, y.Manifest.Value))
	}

	caps, err := parseCapabilities(y.Capabilities, dir)
	if err != nil {
		return nil, err
	}
	a.Capabilities = caps

	if f.Policy, err = y.Policy.policy(); err != nil {
		return nil, err
	}
	for i, r := range y.Approvals {
		rule := ApprovalRule{Tool: r.Tool}
		if r.Match != "" {
			re, err := regexp.Compile(r.Match)
			if err != nil {
				return nil, sandbox.Errorf(sandbox.ErrInvalid, "agent file: approvals[%d].match: %v", i, err)
			}
			rule.Match = re
		}
		if r.Tool == "" && r.Match == "" {
			return nil, sandbox.Errorf(sandbox.ErrInvalid, "agent file: approvals[%d] needs a tool or a match (use tool: \"*\" to approve every call)", i)
		}
		f.Approvals = append(f.Approvals, rule)
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
// one-key mapping from name to options.
func parseCapabilities(nodes []yaml.Node, dir string) ([]Capability, error) {
	if nodes == nil {
		return nil, nil
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
				return nil, sandbox.Errorf(sandbox.ErrInvalid, "agent file: line %d: a capability is a name or a single \"name: {options}\"", n.Line)
			}
			name, opts = n.Content[0].Value, n.Content[1]
		default:
			return nil, sandbox.Errorf(sandbox.ErrInvalid, "agent file: line %d: a capability is a name or a single \"name: {options}\"", n.Line)
		}
		if seen[name] {
			return nil, sandbox.Errorf(sandbox.ErrInvalid, "agent file: line %d: capability %q is listed twice", n.Line, name)
		}
		seen[name] = true
		c, err := newCapability(name, opts, dir)
		if err != nil {
			return nil, sandbox.Errorf(sandbox.ErrInvalid, "agent file: line %d: capability %s: %v", n.Line, name, err)
		}
		caps = append(caps, c)
	}
	return caps, nil
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
			return fmt.Errorf("line %d: unknown option %q (known: %s)", k.Line, k.Value, strings.Join(names, ", "))
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
			MaxImage     string `yaml:"max_image"`
		}
		if err := decodeOpts(opts, &o); err != nil {
			return nil, err
		}
		f := &Filesystem{MaxReadLines: o.MaxReadLines}
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
	return nil, fmt.Errorf("unknown capability (known: shell, filesystem, skills, compaction)")
}

func (p policyYAML) policy() (sandbox.Policy, error) {
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
			return pol, sandbox.Errorf(sandbox.ErrInvalid, "agent file: line %d: policy.network is none, host, or a list of allowed hosts", p.Network.Line)
		}
	case yaml.SequenceNode:
		var hosts []string
		if err := p.Network.Decode(&hosts); err != nil {
			return pol, sandbox.Errorf(sandbox.ErrInvalid, "agent file: line %d: policy.network: %v", p.Network.Line, err)
		}
		pol.Network = sandbox.NetworkPolicy{Mode: sandbox.NetworkAllowList, Allow: hosts}
	default:
		return pol, sandbox.Errorf(sandbox.ErrInvalid, "agent file: line %d: policy.network is none, host, or a list of allowed hosts", p.Network.Line)
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
			return pol, sandbox.Errorf(sandbox.ErrInvalid, "agent file: policy.%s: %v", s.key, err)
		}
		*s.dst = n
	}
	r.Pids, r.CPUs = p.Pids, p.CPUs
	var err error
	if r.ExecTimeout, err = parseDuration("policy.timeout", p.Timeout); err != nil {
		return pol, err
	}
	if r.SessionTimeout, err = parseDuration("policy.session_timeout", p.SessionTimeout); err != nil {
		return pol, err
	}
	pol.Filesystem.ReadOnly, pol.Filesystem.Deny = p.ReadOnly, p.Deny
	if err := pol.Validate(); err != nil {
		return pol, fmt.Errorf("agent file: %w", err)
	}
	return pol, nil
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

// lineOf is the 1-based line of the first occurrence of needle, or 0.
func lineOf(data []byte, needle string) int {
	i := bytes.Index(data, []byte(needle))
	if i < 0 {
		return 0
	}
	return bytes.Count(data[:i], []byte("\n")) + 1
}
