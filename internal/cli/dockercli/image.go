package dockercli

import (
	"fmt"
	"time"

	"github.com/agentbox/agentbox/internal/cli"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/sandbox/docker"
)

// Image is the image command.
func Image(*cli.App) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Manage the docker backend's base image",
		Long: `The docker backend runs sessions in agentbox/base:latest unless --image names
another image. No registry is used: the base image is assembled from this
host's own programs (sh, coreutils, python3 and its standard library, git,
and their shared libraries) and imported into the engine DOCKER_HOST names.

Any local image works with --image IMG if it has /bin/sh (agentbox runs
each command under a small sh wrapper to track and kill its processes);
build or load it with docker first (docker build / docker load).`,
	}
	cmd.AddCommand(newImageBuildCmd())
	return cmd
}

func newImageBuildCmd() *cobra.Command {
	var force bool
	var tag string
	cmd := &cobra.Command{
		Use:   "build",
		Short: "Build agentbox/base:latest from host binaries (cached)",
		Long: `Build the docker backend's base image from host binaries and import it.
The build is cached: when the image exists and its agentbox.content label
matches the host files it would be made of, nothing is done (--force
rebuilds anyway).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := docker.New(docker.Options{})
			if err != nil {
				return cli.Fail(fmt.Errorf("image build: %w", err))
			}
			defer c.Close()
			var bar *progressbar.ProgressBar
			start := time.Now()
			res, err := c.BuildBaseImage(cmd.Context(), docker.BuildOptions{Image: tag, Force: force, Progress: func(total, sent int64) {
				if bar == nil {
					bar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(cmd.ErrOrStderr()),
						progressbar.OptionSetDescription("importing "+orDefault(tag, docker.BaseImage)),
						progressbar.OptionShowBytes(true), progressbar.OptionThrottle(100*time.Millisecond))
				}
				_ = bar.Add64(sent)
			}})
			if bar != nil {
				_ = bar.Finish()
				fmt.Fprintln(cmd.ErrOrStderr())
			}
			if err != nil {
				return cli.Fail(fmt.Errorf("image build: %w", err))
			}
			state := "built"
			if res.Cached {
				state = "up to date"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s: %s (%d files, %d MiB, content %s) in %s\n",
				state, res.Image, shortImageID(res.ID), res.Files, res.Bytes>>20, res.Content[:12], time.Since(start).Round(time.Millisecond))
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "rebuild even when an up-to-date image exists")
	cmd.Flags().StringVar(&tag, "tag", "", "image reference to build (default "+docker.BaseImage+")")
	return cmd
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func shortImageID(id string) string {
	if len(id) > 19 {
		return id[:19]
	}
	return id
}
