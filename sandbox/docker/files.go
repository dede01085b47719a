package docker

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/wsfs"
)

// maxReadOutside bounds ReadFile of paths outside the workspace, which
// travel through an exec's output.
const maxReadOutside = 64 << 20

// where a sandbox path lives, for file operations.
type location struct {
	abs   string // clean absolute sandbox path
	rel   string // relative to the workspace when inWS
	inWS  bool   // in the workspace bind, not under a mount
	mount *sandbox.Mount
}

// locate resolves a caller's sandbox path: relative paths are taken from
// the workdir and may not climb out of it; absolute ones may name any
// sandbox path. Denied paths are refused.
func (s *session) locate(p string) (location, error) {
	rel, err := sandbox.ResolveWorkspacePath(s.spec.Workdir, p)
	var loc location
	switch {
	case err == nil:
		loc = location{abs: path.Join(s.spec.Workdir, rel), rel: rel, inWS: true}
	case errors.Is(err, sandbox.ErrPathEscape) && path.IsAbs(p):
		loc = location{abs: path.Clean(p)}
	default:
		return location{}, err
	}
	for _, d := range s.spec.Policy.Filesystem.Deny {
		if under(loc.abs, path.Clean(d)) {
			return location{}, &sandbox.Error{Op: "docker: access " + loc.abs, Err: fmt.Errorf("denied by the policy (%s): %w", d, fs.ErrPermission)}
		}
	}
	for i := range s.spec.Mounts {
		m := &s.spec.Mounts[i]
		if under(loc.abs, path.Clean(m.Target)) && (loc.mount == nil || len(m.Target) > len(loc.mount.Target)) {
			loc.mount, loc.inWS = m, false
		}
	}
	return loc, nil
}

func under(p, root string) bool {
	return p == root || strings.HasPrefix(p, strings.TrimSuffix(root, "/")+"/")
}

// ReadFile reads a file: from the workspace through the host bind (with
// openat2 RESOLVE_IN_ROOT, so links planted by the sandbox cannot lead
// out), anywhere else through the container (cat as the session user, so
// the sandbox's own view and permissions apply).
func (s *session) ReadFile(ctx context.Context, p string) ([]byte, error) {
	return s.readFile(ctx, p, 0)
}

// ReadFileLimit reads a file of at most max bytes (sandbox.LimitedReader):
// one in the workspace is refused by its size before it is read, one
// elsewhere by the bounded output of cat.
func (s *session) ReadFileLimit(ctx context.Context, p string, max int64) ([]byte, error) {
	return s.readFile(ctx, p, max)
}

// readFile reads p; max > 0 bounds its size.
func (s *session) readFile(ctx context.Context, p string, max int64) ([]byte, error) {
	if err := s.live(); err != nil {
		return nil, err
	}
	loc, err := s.locate(p)
	if err != nil {
		return nil, err
	}
	if loc.inWS {
		return s.root.ReadFile(loc.rel, max)
	}
	limit := int64(maxReadOutside)
	if max > 0 {
		limit = min(max, limit)
	}
	return s.readInContainer(ctx, loc.abs, limit)
}

func (s *session) readInContainer(ctx context.Context, abs string, limit int64) ([]byte, error) {
	res, err := sandbox.Exec(ctx, s, sandbox.ExecRequest{Cmd: []string{"cat", "--", abs}, MaxOutput: limit})
	if err != nil {
		return nil, err
	}
	if res.ExitCode != 0 {
		msg := strings.TrimSpace(string(res.Stderr))
		var kind error
		cause := errors.New(msg)
		switch {
		case strings.Contains(msg, "No such file"):
			kind = sandbox.ErrNotFound
		case strings.Contains(msg, "Permission denied"):
			cause = fmt.Errorf("%s: %w", msg, fs.ErrPermission)
		case strings.Contains(msg, "Is a directory"):
			kind = sandbox.ErrInvalid
		}
		return nil, sandbox.Wrap("docker: read "+abs, kind, cause)
	}
	if res.OutputTruncated {
		return nil, sandbox.Wrap("docker: read "+abs, sandbox.ErrOutputLimit, &sandbox.FileSizeError{Size: -1, Limit: limit})
	}
	return res.Stdout, nil
}

// WriteFile writes a file atomically in the workspace (or a writable
// mount), owned by the session user. Read-only paths and mounts, denied
// paths and the rest of the (read-only) root are refused.
func (s *session) WriteFile(ctx context.Context, p string, data []byte, mode fs.FileMode) error {
	if err := s.live(); err != nil {
		return err
	}
	loc, err := s.locate(p)
	if err != nil {
		return err
	}
	for _, ro := range s.spec.Policy.Filesystem.ReadOnly {
		if under(loc.abs, path.Clean(ro)) {
			return &sandbox.Error{Op: "docker: write " + loc.abs, Err: fmt.Errorf("read-only by the policy (%s): %w", ro, fs.ErrPermission)}
		}
	}
	uid, gid := -1, -1
	if os.Geteuid() == 0 {
		uid, gid = s.who.uid, s.who.gid
	}
	switch {
	case loc.inWS:
		return s.root.WriteFile(loc.rel, data, mode, uid, gid)
	case loc.mount != nil && !loc.mount.ReadOnly:
		r, err := openFiles(loc.mount.Source, s.spec.Policy)
		if err != nil {
			return err
		}
		defer r.Close()
		rel := strings.TrimPrefix(strings.TrimPrefix(loc.abs, path.Clean(loc.mount.Target)), "/")
		if rel == "" {
			rel = "."
		}
		return r.WriteFile(rel, data, mode, uid, gid)
	case loc.mount != nil:
		return &sandbox.Error{Op: "docker: write " + loc.abs, Err: fmt.Errorf("mount %s is read-only: %w", loc.mount.Target, fs.ErrPermission)}
	}
	return sandbox.Errorf(sandbox.ErrPathEscape, "docker: write %s: outside the workspace %s (the image root is read-only)", loc.abs, s.spec.Workdir)
}

// ListDir lists a directory: the workspace through the host bind,
// anywhere else through the engine's archive API. (The archive API sees
// the image and bind mounts but not tmpfs contents, so /tmp lists empty.)
func (s *session) ListDir(ctx context.Context, p string) ([]sandbox.FileInfo, error) {
	if err := s.live(); err != nil {
		return nil, err
	}
	loc, err := s.locate(p)
	if err != nil {
		return nil, err
	}
	if loc.inWS {
		return s.root.ListDir(loc.rel)
	}
	if loc.mount != nil {
		r, err := openFiles(loc.mount.Source, s.spec.Policy)
		if err != nil {
			return nil, err
		}
		defer r.Close()
		rel := strings.TrimPrefix(strings.TrimPrefix(loc.abs, path.Clean(loc.mount.Target)), "/")
		if rel == "" {
			rel = "."
		}
		return r.ListDir(rel)
	}
	return s.listInContainer(ctx, loc.abs)
}

func (s *session) listInContainer(ctx context.Context, abs string) ([]sandbox.FileInfo, error) {
	res, err := s.c.api.CopyFromContainer(ctx, s.containerID, client.CopyFromContainerOptions{SourcePath: abs})
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return nil, sandbox.Wrap("docker: list "+abs, sandbox.ErrNotFound, err)
		}
		return nil, s.execError("list "+abs, err)
	}
	defer res.Content.Close()
	if !res.Stat.Mode.IsDir() {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "docker: list %s: not a directory", abs)
	}
	tr := tar.NewReader(res.Content)
	var out []sandbox.FileInfo
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, sandbox.Wrap("docker: list "+abs, nil, fmt.Errorf("read archive: %w", err))
		}
		// Entries are "<base>/<name>[/...]"; keep direct children.
		_, rest, ok := strings.Cut(strings.TrimSuffix(hdr.Name, "/"), "/")
		if !ok || rest == "" || strings.Contains(rest, "/") {
			continue
		}
		fi := hdr.FileInfo()
		out = append(out, sandbox.FileInfo{Name: rest, Size: hdr.Size, Mode: fi.Mode(), ModTime: hdr.ModTime, IsDir: fi.IsDir(), Target: hdr.Linkname})
	}
	slices.SortFunc(out, func(a, b sandbox.FileInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// openFiles opens a host directory bound into the container for the file
// API. Threat: deny and read-only paths are matched by name, but the I/O
// goes through the host's view of the bind, where a symlink the sandbox
// planted (ln -s secret/x a) would reach a protected file under another
// name; so when the policy protects paths by name, every symlink on the
// way is refused.
func openFiles(dir string, p sandbox.Policy) (*wsfs.Root, error) {
	r, err := wsfs.Open(dir)
	if err != nil {
		return nil, err
	}
	if len(p.Filesystem.Deny) > 0 || len(p.Filesystem.ReadOnly) > 0 {
		r.RefuseSymlinks()
	}
	return r, nil
}
