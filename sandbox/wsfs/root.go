// Package wsfs gives confined file access under a root directory (a
// sandbox's workspace, possibly seen from the host as
// /proc/<pid>/root/workspace).
//
// Threat: the directory's contents are controlled by a sandboxed, possibly
// adversarial process. It can plant symlinks (absolute or relative, chained,
// to directories) and swap them while the host reads or writes, hoping the
// host follows one out of the root and reads a host secret or overwrites a
// host file. Every path is therefore resolved by internal/beneath's
// OpenInRoot: openat2(2) RESOLVE_IN_ROOT|RESOLVE_NO_MAGICLINKS, which treats
// the root as "/" for every component, including symlink targets and "..",
// or, on kernels without openat2 (before 5.6), a component-by-component
// walk with O_NOFOLLOW that resolves symlinks itself, clamped at the root.
//
// The root is the workspace, not the sandbox's "/": an absolute link
// /workspace/x inside the workspace resolves to <root>/workspace/x (usually
// not found), never to a file outside the root. Mounts inside the root are
// crossed as they are.
package wsfs

import (
	"fmt"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/sandbox"
)

// Root is an open root directory. All of its methods resolve paths inside
// it; it is safe for concurrent use.
type Root struct {
	dir  string
	mu   sync.RWMutex // guards fd against Close
	fd   int          // O_PATH|O_DIRECTORY descriptor of dir, -1 once closed
	walk bool         // the component walk even where openat2 works (tests)
	// noLinks refuses every symlink on the way, not only those that would
	// leave the root (see RefuseSymlinks).
	noLinks bool
}

// RefuseSymlinks makes every later access fail on a path that goes
// through a symlink, even one that stays inside the root. A caller whose
// policy protects parts of the root by name (denied or read-only paths)
// needs it: a link planted elsewhere in the root would otherwise reach
// those parts under another name. Call it before the Root is shared.
func (r *Root) RefuseSymlinks() { r.noLinks = true }

// Open opens dir once (O_PATH|O_DIRECTORY) as the root of every later
// access. dir itself is resolved normally: it is trusted, its contents are
// not.
func Open(dir string) (*Root, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, mapErr("wsfs: open root", dir, fmt.Errorf("open %s: %w", dir, err))
	}
	return &Root{dir: dir, fd: fd}, nil
}

// Dir is the directory the root was opened from.
func (r *Root) Dir() string { return r.dir }

// Close releases the root's descriptor. It is idempotent.
func (r *Root) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fd < 0 {
		return nil
	}
	err := unix.Close(r.fd)
	r.fd = -1
	if err != nil {
		return sandbox.Wrap("wsfs: close root "+r.dir, nil, err)
	}
	return nil
}

// hold returns the root descriptor with the read lock taken; release must
// be called when the operation is done.
func (r *Root) hold(op string) (int, func(), error) {
	r.mu.RLock()
	if r.fd < 0 {
		r.mu.RUnlock()
		return -1, nil, sandbox.Wrap("wsfs: "+op, sandbox.ErrClosed, fmt.Errorf("root %s is closed", r.dir))
	}
	return r.fd, r.mu.RUnlock, nil
}
