package sandbox

import (
	"context"
	"fmt"
	"time"
)

// WatchOp is what happened to a path a watch reports.
type WatchOp string

// The operations a watch reports.
const (
	// WatchCreate: a file, directory or link appeared (made, or moved in
	// from outside the watched tree).
	WatchCreate WatchOp = "create"
	// WatchWrite: a file's contents changed. Consecutive writes to the
	// same file may be reported once.
	WatchWrite WatchOp = "write"
	// WatchRemove: a path disappeared (removed, or moved out of the
	// watched tree).
	WatchRemove WatchOp = "remove"
	// WatchRename: a path moved within the watched tree, from OldPath to
	// Path.
	WatchRename WatchOp = "rename"
	// WatchOverflow: events were lost (the queue was full, or the kernel's
	// was, or the watch reached its limit of directories); what the
	// watcher believes of the tree may be stale, and a fresh listing is
	// the way to know it again. Path is empty; Err says which limit.
	WatchOverflow WatchOp = "overflow"
)

// WatchEvent is one change under a watched path.
type WatchEvent struct {
	Op WatchOp `json:"op"`
	// Path is the changed path relative to the workspace, with slashes
	// ("src/main.go"); "." is the workspace itself.
	Path string `json:"path,omitempty"`
	// OldPath is where a renamed path was before.
	OldPath string `json:"old_path,omitempty"`
	// IsDir is set when the path is a directory.
	IsDir bool `json:"is_dir,omitempty"`
	// Time is when the watcher read the event from the kernel.
	Time time.Time `json:"time"`
	// Err says why an overflow happened.
	Err string `json:"error,omitempty"`
}

// WatchQueue is how many events a watch holds for a reader that does not
// keep up; past it, events are dropped and one WatchOverflow says so.
const WatchQueue = 4096

// Watcher is a session whose workspace can be watched for changes.
// Backends implement it where they see the workspace's files from the
// host (the native, local and docker backends do); use the package
// function Watch, which says by name when a backend cannot.
type Watcher interface {
	// Watch reports changes under path (a sandbox path in the workspace,
	// as for ReadFile), in every directory below it, including ones made
	// later. The channel is closed when ctx ends, when the watched path
	// itself is removed or moved away (after a WatchRemove of it), or when
	// the session closes. Events are queued up to WatchQueue; a reader
	// that falls behind gets a WatchOverflow in place of what was lost.
	Watch(ctx context.Context, path string) (<-chan WatchEvent, error)
}

// Watch reports changes under path in session s (see Watcher), or says
// that its backend cannot.
func Watch(ctx context.Context, s Session, path string) (<-chan WatchEvent, error) {
	w, ok := s.(Watcher)
	if !ok {
		return nil, Wrap("watch", ErrUnsupported, fmt.Errorf("session %s: the %s backend cannot watch a workspace", s.ID(), s.State().Backend))
	}
	return w.Watch(ctx, path)
}

// DeniedInWorkspace lists the policy's denied paths that lie in the
// workspace, relative to it: what a watch neither follows nor reports.
func DeniedInWorkspace(spec Spec) []string {
	workdir := spec.Workdir
	if workdir == "" {
		workdir = DefaultWorkdir
	}
	var out []string
	for _, d := range spec.Policy.Filesystem.Deny {
		if rel, err := ResolveWorkspacePath(workdir, d); err == nil {
			out = append(out, rel)
		}
	}
	return out
}
