package mcp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

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
type Config struct {
	Ceiling sandbox.Policy
}

type configYAML struct {
	Policy agent.PolicySpec `yaml:"policy"`
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
	pol, err := y.Policy.Policy("policy file")
	if err != nil {
		return nil, err
	}
	return &Config{Ceiling: pol}, nil
}
