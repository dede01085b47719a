// Package dockercli is the docker backend's part of agentbox's command
// line: the backend itself, its garbage collection and the image command.
// It links the Docker Engine client, which only agentbox-full carries.
package dockercli

import (
	"context"
	"fmt"
	"io"

	"github.com/agentbox/agentbox/internal/cli"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/docker"
)

// Register links the docker backend, its gc and the image command into a.
func Register(a *cli.App) {
	a.AddBackend("docker", Backend, GC)
	a.Add(Image)
}

// Backend is the docker backend: one container per session on the engine
// DOCKER_HOST names, from --image (default agentbox/base:latest, built
// locally by `agentbox image build` or on first use).
func Backend(o cli.BackendOptions) (sandbox.Client, error) {
	return docker.New(docker.Options{Snapshots: o.Snapshots, Logger: o.Logger, Image: o.Image})
}

// GC removes the containers of sessions whose owner died.
func GC(ctx context.Context, _ *cli.App, opts cli.GCOptions, out io.Writer) error {
	dryRun := opts.DryRun
	c, err := docker.New(docker.Options{})
	if err != nil {
		return err
	}
	defer c.Close()
	reaped, err := c.GC(ctx, docker.GCOptions{DryRun: dryRun})
	verb := "removed"
	if dryRun {
		verb = "would remove"
	}
	for _, r := range reaped {
		fmt.Fprintf(out, "docker: %s container %s (session %s): %s\n", verb, r.Container, r.Session, r.Reason)
	}
	if len(reaped) == 0 {
		fmt.Fprintln(out, "docker: no orphaned containers")
	}
	return err
}
