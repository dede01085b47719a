package mcp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"

	"go.yaml.in/yaml/v3"

	"github.com/agentbox/agentbox/agent"
	"github.com/agentbox/agentbox/sandbox"
)

// Config is the operator's file (agentbox mcp --policy FILE):
//
//	policy:            # the ceiling of every session, and its default
//	  network: [pypi.org, files.pythonhosted.org]
//	  memory: 1G
//	  timeout: 5m
//	presets:           # named policies within the ceiling; "default" applies
//	  default:         # when a client names none
//	    network: none
//	    memory: 512M
//	  python:
//	    network: [pypi.org, files.pythonhosted.org]
//	approvals:         # calls that run only when the client's user approves
//	  - tool: exec
//	    match: '\brm\s+-rf\b|curl'
type Config struct {
	Ceiling   sandbox.Policy
	Presets   map[string]sandbox.Policy
	Approvals []agent.ApprovalRule
}

type configYAML struct {
	Policy    agent.PolicySpec            `yaml:"policy"`
	Presets   map[string]agent.PolicySpec `yaml:"presets"`
	Approvals []struct {
		Tool  string `yaml:"tool"`
		Match string `yaml:"match"`
	} `yaml:"approvals"`
}

// LoadConfig reads the operator's file strictly: an unknown key or a bad
// value is an error that names the file and the line.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("policy file: %w", err)
	}
	c, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("policy file %s: %w", path, err)
	}
	return c, nil
}

// ParseConfig parses the operator's file (YAML).
func ParseConfig(data []byte) (*Config, error) {
	var y configYAML
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&y); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	pol, err := y.Policy.Policy("policy")
	if err != nil {
		return nil, err
	}
	c := &Config{Ceiling: pol, Presets: map[string]sandbox.Policy{}}
	for name, spec := range y.Presets {
		p, err := spec.Policy("presets." + name)
		if err != nil {
			return nil, err
		}
		if _, err := sandbox.Bound(pol, p); err != nil {
			return nil, fmt.Errorf("presets.%s: %w", name, err)
		}
		c.Presets[name] = p
	}
	for i, a := range y.Approvals {
		if a.Tool == "" && a.Match == "" {
			return nil, fmt.Errorf("approvals[%d] needs a tool or a match (tool: \"*\" asks for every call)", i)
		}
		rule := agent.ApprovalRule{Tool: a.Tool}
		if a.Match != "" {
			re, err := regexp.Compile(a.Match)
			if err != nil {
				return nil, fmt.Errorf("approvals[%d].match: %w", i, err)
			}
			rule.Match = re
		}
		c.Approvals = append(c.Approvals, rule)
	}
	return c, nil
}
