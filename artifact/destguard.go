package artifact

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentbox/agentbox/sandbox"
)

// checkDestOutsideSource refuses a destination inside the host directory
// of the source's workspace. Threat: the sandbox can shape that directory
// (plant links, race the staging), and outputs promoted there have not
// left its reach anyway.
func checkDestOutsideSource(src Source, dest string) error {
	ws := hostWorkspace(src)
	if ws == "" {
		return nil
	}
	wsReal, err := resolveExisting(ws)
	if err != nil {
		return nil // the source reports its own missing directory
	}
	destReal, err := resolveExisting(dest)
	if err != nil {
		return sandbox.Wrap("artifact: promote: resolve destination "+dest, sandbox.ErrInvalid, err)
	}
	if within(wsReal, destReal) {
		return sandbox.Errorf(sandbox.ErrPathEscape, "artifact: promote: destination %s is inside the workspace %s; promote to a directory the sandbox cannot reach", dest, ws)
	}
	return nil
}

// hostWorkspace is the host directory of a source's workspace, when known.
func hostWorkspace(src Source) string {
	switch s := src.(type) {
	case *DirSource:
		return s.dir
	case *SessionSource:
		return s.s.State().Spec.Workspace
	}
	return ""
}

// resolveExisting is p with symlinks resolved in the part that exists; the
// missing rest is appended as it is.
func resolveExisting(p string) (string, error) {
	p, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	var rest []string
	for {
		real, err := filepath.EvalSymlinks(p)
		if err == nil {
			return filepath.Join(append([]string{real}, rest...)...), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(p)
		if parent == p {
			return "", err
		}
		rest = append([]string{filepath.Base(p)}, rest...)
		p = parent
	}
}

// within reports whether p is dir or below it (both clean and absolute).
func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(os.PathSeparator))
}
