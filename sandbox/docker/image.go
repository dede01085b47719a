package docker

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/agentbox/agentbox/sandbox"
)

// BaseImage is the image sessions run when neither Spec.Image nor
// Options.Image names one. It is built locally by BuildBaseImage (no
// registry is involved).
const BaseImage = "agentbox/base:latest"

// Labels agentbox puts on what it creates.
const (
	labelContent   = "agentbox.content"    // base image: hash of its content plan
	labelSession   = "agentbox.session"    // container: session id
	labelOwnerPID  = "agentbox.owner-pid"  // container: pid of the agentbox process that made it
	labelOwnerHost = "agentbox.owner-host" // container: host name of that process
	labelCreated   = "agentbox.created"    // container: RFC 3339 creation time
	labelDetached  = "agentbox.detached"   // container: "true" when it outlives its maker (Spec.Detached)
)

// BuildOptions control BuildBaseImage.
type BuildOptions struct {
	// Image is the reference to tag; default BaseImage.
	Image string
	// Force rebuilds even when an image with the same content exists.
	Force bool
	// Progress, when set, is told the total bytes to send once and then
	// each chunk sent.
	Progress func(total, sent int64)
}

// BuildResult describes a base image build.
type BuildResult struct {
	Image string
	ID    string
	// Cached is set when an up-to-date image existed and nothing was built.
	Cached bool
	// Content is the content hash stored in the image's agentbox.content label.
	Content string
	Files   int
	Bytes   int64
}

// BuildBaseImage builds agentbox/base from host binaries (a shell,
// coreutils, python3 and its standard library, git, and their shared
// libraries) and imports it with the engine's image import API. The build
// is cached: when the image exists with the same content label it is kept.
func (c *Client) BuildBaseImage(ctx context.Context, opts BuildOptions) (BuildResult, error) {
	const op = "docker: build base image"
	if opts.Image == "" {
		opts.Image = BaseImage
	}
	plan, err := planBaseRootfs()
	if err != nil {
		return BuildResult{}, sandbox.Wrap(op, sandbox.ErrUnavailable, err)
	}
	res := BuildResult{Image: opts.Image, Content: plan.hash(), Files: len(plan.entries), Bytes: plan.totalBytes()}
	oldID := ""
	if insp, err := c.api.ImageInspect(ctx, opts.Image); err == nil {
		oldID = insp.ID
		if !opts.Force && insp.Config != nil && insp.Config.Labels[labelContent] == res.Content {
			res.ID, res.Cached = insp.ID, true
			return res, nil
		}
	} else if !cerrdefs.IsNotFound(err) {
		return res, c.unavailable(op, err)
	}
	if opts.Progress != nil {
		opts.Progress(res.Bytes, 0)
	}
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(plan.writeTar(pw, func(n int64) {
			if opts.Progress != nil {
				opts.Progress(res.Bytes, n)
			}
		}))
	}()
	changes := []string{
		"ENV PATH=/usr/local/bin:/usr/bin:/bin",
		"ENV HOME=/home/agent",
		"WORKDIR /workspace",
		"USER 1000:1000",
		`CMD ["/bin/sh"]`,
		"LABEL " + labelContent + "=" + res.Content,
	}
	rc, err := c.api.ImageImport(ctx, client.ImageImportSource{Source: pr, SourceName: "-"}, opts.Image, client.ImageImportOptions{
		Message: "agentbox base image from host binaries (" + rootfsVersion + ")",
		Changes: changes,
	})
	if err != nil {
		pr.CloseWithError(err)
		return res, c.unavailable(op, fmt.Errorf("import %s: %w", opts.Image, err))
	}
	defer rc.Close()
	id, err := readImportStream(rc)
	pr.Close()
	if err != nil {
		return res, sandbox.Wrap(op, nil, fmt.Errorf("import %s: %w", opts.Image, err))
	}
	res.ID = id
	if oldID != "" && oldID != id {
		// The previous build is now untagged; drop it unless a container
		// still uses it (then the engine refuses and it stays).
		if _, err := c.api.ImageRemove(ctx, oldID, client.ImageRemoveOptions{}); err != nil {
			c.log.Debug("docker: keep previous base image", "id", oldID, "err", err)
		}
	}
	return res, nil
}

// readImportStream reads the engine's JSON message stream of an import and
// returns the image id it reports, or the error it reports.
func readImportStream(r io.Reader) (string, error) {
	dec := json.NewDecoder(r)
	var id string
	for {
		var msg struct {
			Status      string `json:"status"`
			Error       string `json:"error"`
			ErrorDetail *struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&msg); err == io.EOF {
			break
		} else if err != nil {
			return "", fmt.Errorf("read import progress: %w", err)
		}
		if msg.Error != "" {
			return "", fmt.Errorf("engine: %s", msg.Error)
		}
		if s := strings.TrimSpace(msg.Status); strings.HasPrefix(s, "sha256:") {
			id = s
		}
	}
	if id == "" {
		return "", fmt.Errorf("engine reported no image id")
	}
	return id, nil
}

// EnsureImage checks that ref exists locally. The base image is built when
// missing; any other image must already be there (no registry is used):
// a missing one is ErrNotFound saying how to provide it.
func (c *Client) EnsureImage(ctx context.Context, ref string) error {
	_, err := c.api.ImageInspect(ctx, ref)
	if err == nil {
		return nil
	}
	if !cerrdefs.IsNotFound(err) {
		return c.unavailable("docker: inspect image "+ref, err)
	}
	if ref == BaseImage {
		_, err := c.BuildBaseImage(ctx, BuildOptions{Image: ref})
		return err
	}
	return sandbox.Wrap("docker: create", sandbox.ErrNotFound, fmt.Errorf("image %q is not present on the engine at %s (agentbox never pulls: load it with 'docker load' or 'docker build', or use the base image: agentbox image build)", ref, c.host))
}
