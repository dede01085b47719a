package sandbox

import (
	"path"
	"strings"
)

// ResolveWorkspacePath turns a sandbox path given by a caller (absolute
// under workdir, or relative to it) into a clean path relative to the
// workspace root ("." for the root itself). Anything that would leave the
// workspace, lexically, is ErrPathEscape; symlinks are the backend's to
// resolve safely (for example with openat2 RESOLVE_IN_ROOT).
func ResolveWorkspacePath(workdir, p string) (string, error) {
	if workdir == "" {
		workdir = DefaultWorkdir
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", Errorf(ErrInvalid, "path %q contains a NUL byte", p)
	}
	if p == "" {
		return ".", nil
	}
	if path.IsAbs(p) {
		clean := path.Clean(p)
		if clean == workdir {
			return ".", nil
		}
		rel, ok := strings.CutPrefix(clean, strings.TrimSuffix(workdir, "/")+"/")
		if !ok {
			return "", Errorf(ErrPathEscape, "path %q is outside the workspace %s", p, workdir)
		}
		return rel, nil
	}
	clean := path.Clean(p)
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", Errorf(ErrPathEscape, "path %q leaves the workspace", p)
	}
	return clean, nil
}

// MountRoots are the sandbox directories under which extra mounts may be
// placed, besides the workspace itself.
var MountRoots = []string{"/mnt", "/opt", "/data"}

// ValidateMountTarget checks that a mount target is an absolute, clean
// path inside the workspace or one of MountRoots, and not a root itself
// (mounting over /workspace would hide it).
func ValidateMountTarget(workdir, target string) error {
	if workdir == "" {
		workdir = DefaultWorkdir
	}
	if strings.IndexByte(target, 0) >= 0 {
		// mount(2) would silently cut the path at the NUL.
		return Errorf(ErrInvalid, "mount target %q contains a NUL byte", target)
	}
	if !path.IsAbs(target) {
		return Errorf(ErrInvalid, "mount target %q must be an absolute sandbox path", target)
	}
	clean := path.Clean(target)
	roots := append([]string{workdir}, MountRoots...)
	for _, root := range roots {
		if strings.HasPrefix(clean, root+"/") {
			return nil
		}
		if clean == root {
			return Errorf(ErrPathEscape, "mount target %q is a mount root itself, which a mount would hide; mount at a directory under it, such as %s/NAME", target, root)
		}
	}
	return Errorf(ErrPathEscape, "mount target %q is outside the sandbox layout: mount at a directory under one of %s", target, strings.Join(roots, ", "))
}
