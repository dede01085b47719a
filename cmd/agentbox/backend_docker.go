//go:build !lean

package main

import (
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/docker"
)

// The docker backend: one container per session on the engine DOCKER_HOST
// names, from --image (default agentbox/base:latest, built locally by
// `agentbox image build` or on first use).
func init() {
	backends["docker"] = func(o backendOptions) (sandbox.Client, error) {
		return docker.New(docker.Options{Snapshots: o.Snapshots, Logger: o.Logger, Image: o.Image})
	}
}
