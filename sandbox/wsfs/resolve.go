package wsfs

import (
	"path"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/beneath"
	"github.com/agentbox/agentbox/sandbox"
)

// cleanRel checks a root-relative path. Callers pass the output of
// sandbox.ResolveWorkspacePath, but this package defends anyway: an
// absolute path or one climbing above the root is refused lexically before
// the kernel sees it.
func cleanRel(rel string) (string, error) {
	if strings.IndexByte(rel, 0) >= 0 {
		return "", sandbox.Errorf(sandbox.ErrInvalid, "path %q contains a NUL byte", rel)
	}
	if rel == "" {
		return ".", nil
	}
	if path.IsAbs(rel) {
		return "", sandbox.Errorf(sandbox.ErrPathEscape, "path %q is absolute, want one relative to the root", rel)
	}
	c := path.Clean(rel)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", sandbox.Errorf(sandbox.ErrPathEscape, "path %q leaves the root", rel)
	}
	return c, nil
}

// openIn opens rel under the root descriptor with flags (O_CLOEXEC is
// added). A final symlink is followed, inside the root, unless flags has
// O_NOFOLLOW; with RefuseSymlinks no symlink is followed at all.
func (r *Root) openIn(root int, rel string, flags int) (int, error) {
	o := beneath.Options{Flags: flags, Walk: r.walk}
	if r.noLinks {
		return beneath.Open(root, rel, o)
	}
	return beneath.OpenInRoot(root, rel, o)
}

// openParent opens the directory holding rel (O_PATH) and returns it with
// rel's last component. rel must name something below the root.
func (r *Root) openParent(root int, rel string) (int, string, error) {
	if rel == "." {
		return -1, "", sandbox.Errorf(sandbox.ErrInvalid, "the root itself has no parent to operate in")
	}
	dir, base := path.Split(rel)
	dir = path.Clean("./" + dir)
	fd, err := r.openIn(root, dir, unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return -1, "", err
	}
	return fd, base, nil
}
