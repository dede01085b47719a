package sandbox

import (
	"context"
	"io"
	"io/fs"
	"time"
)

// Client is a sandbox backend: it creates sessions, reattaches to them from
// saved State, rebuilds them from what a gone one left, and deletes what a
// State names.
type Client interface {
	// Name is the backend's short name ("linux", "docker", "local", "remote").
	Name() string
	// Enforces lists the policy parts this backend can enforce on this host,
	// detected at run time.
	Enforces() []Part
	// Create starts a session for spec. It fails with ErrPolicyUnsupported
	// when spec.Policy asks for a part the backend cannot enforce, unless
	// spec.AllowWeaker is set (and then the weakening is logged).
	Create(ctx context.Context, spec Spec) (Session, error)
	// Resume reattaches to the live sandbox st describes, the same session
	// under the same ID. When the sandbox is gone it fails with ErrGone and
	// changes nothing: Rebuild makes a new session from what it left.
	Resume(ctx context.Context, st State) (Session, error)
	// Rebuild makes a new session, under a new ID, from what the session
	// st describes left behind: its workspace when it still exists, else
	// its latest snapshot, with the same spec. What is left of the old
	// sandbox (processes, groups, state) is cleared first. It fails with
	// ErrInvalid while the old sandbox still runs (Resume it, or Delete
	// it first) and with ErrNotFound when nothing is left to rebuild from.
	Rebuild(ctx context.Context, st State) (Session, error)
	// Delete tears down whatever st names (processes, cgroups, containers,
	// and the workspace if the session owned it). Deleting what is already
	// gone is not an error.
	Delete(ctx context.Context, st State) error
}

// Session is one live sandbox.
type Session interface {
	// ID is unique among this backend's sessions on this host.
	ID() string
	// Start runs a command and streams it; with req.TTY the process gets
	// a pseudo-terminal and Stdout carries the terminal's output. The
	// package function Exec runs a command to completion over Start.
	Start(ctx context.Context, req ExecRequest) (Process, error)
	// ReadFile reads a file as the sandbox sees it. Paths are sandbox paths
	// (absolute under Workdir, or relative to it); see ResolveWorkspacePath.
	ReadFile(ctx context.Context, path string) ([]byte, error)
	// WriteFile writes a file atomically inside the workspace, owned by the
	// session's user.
	WriteFile(ctx context.Context, path string, data []byte, mode fs.FileMode) error
	// ListDir lists a directory as the sandbox sees it, sorted by name.
	ListDir(ctx context.Context, path string) ([]FileInfo, error)
	// Snapshot saves the workspace (minus mounts) to the client's snapshot
	// store and returns its reference. The reference is also kept in State.
	Snapshot(ctx context.Context) (string, error)
	// State is the serializable description of the session, to Resume it
	// from another process. It never carries a credential.
	State() State
	// Stop ends the sandbox's processes but keeps what Resume needs
	// (the workspace and any snapshot), so the session can be rebuilt.
	Stop(ctx context.Context) error
	// Close releases everything the session holds, including the workspace
	// if the session created it. Close is idempotent and safe after a
	// partial start.
	Close(ctx context.Context) error
}

// Process is a command started with Session.Start.
type Process interface {
	// Stdin is the process's standard input; close it to send EOF.
	Stdin() io.WriteCloser
	// Stdout is the process's standard output (the terminal with TTY).
	Stdout() io.Reader
	// Stderr is the process's standard error; with TTY it is empty.
	Stderr() io.Reader
	// Resize changes the terminal size of a TTY process. The new size
	// may reach the terminal shortly after Resize returns (the kube
	// backend sends it on the exec stream, which has no acknowledgement).
	Resize(ctx context.Context, rows, cols uint16) error
	// Kill ends the process and every process it started.
	Kill(ctx context.Context) error
	// Wait waits for the process to end and reports how. It may be called
	// once the output streams are drained (or are being drained).
	Wait(ctx context.Context) (ExitStatus, error)
	// Close releases what the process holds on the caller's side (its
	// streams, a terminal, a connection), killing the process tree if it
	// still runs. It is idempotent; Wait and the streams fail after it.
	Close() error
}

// ExitStatus is how a process ended.
type ExitStatus struct {
	// ExitCode is the exit code; 128+signal when killed by a signal.
	ExitCode int `json:"exit_code"`
	// Signal is the signal name ("SIGKILL") when one ended the process.
	Signal string `json:"signal,omitempty"`
	// OOMKilled is set when the kernel's OOM killer ended the process.
	OOMKilled bool `json:"oom_killed,omitempty"`
	// TimedOut is set when agentbox killed it for exceeding a timeout.
	TimedOut bool `json:"timed_out,omitempty"`
	// Violations lists policy violations that the backend observed
	// (a denied egress host, a limit hit), one readable line each.
	Violations []string `json:"violations,omitempty"`
}

// FileInfo is one entry of Session.ListDir.
type FileInfo struct {
	Name    string      `json:"name"`
	Size    int64       `json:"size"`
	Mode    fs.FileMode `json:"mode"`
	ModTime time.Time   `json:"mod_time"`
	IsDir   bool        `json:"is_dir"`
	// Target is the link target for a symlink.
	Target string `json:"target,omitempty"`
}

// Mount binds a host path into the sandbox.
type Mount struct {
	// Source is an absolute host path.
	Source string `json:"source"`
	// Target is an absolute sandbox path, under the workspace or one of
	// the layout's mountable roots (see ValidateMountTarget).
	Target string `json:"target"`
	// ReadOnly mounts are enforced by the kernel (a read-only bind), not
	// only by permissions.
	ReadOnly bool `json:"read_only"`
}

// Spec describes a session to create.
type Spec struct {
	// Workspace is the host directory bound read-write at Workdir. Empty
	// means the backend creates a fresh one and removes it on Close.
	Workspace string `json:"workspace,omitempty"`
	// Workdir is where the workspace appears in the sandbox and where
	// commands start; default DefaultWorkdir.
	Workdir string `json:"workdir,omitempty"`
	// Image is the root filesystem image for backends that use one
	// (docker); the linux backend uses the host's tool directories.
	Image string `json:"image,omitempty"`
	// Mounts are extra host paths bound into the sandbox.
	Mounts []Mount `json:"mounts,omitempty"`
	// Env is the whole environment of commands (plus what the backend must
	// set, such as HOME, PATH and the proxy variables); the host
	// environment is never inherited.
	Env map[string]string `json:"env,omitempty"`
	// User is "uid[:gid]" to run commands as; empty means DefaultUID.
	User string `json:"user,omitempty"`
	// Policy is what the sandbox may touch.
	Policy Policy `json:"policy"`
	// Snapshot, when set, seeds the workspace from this snapshot reference
	// before the session starts.
	Snapshot string `json:"snapshot,omitempty"`
	// AllowWeaker lets Create proceed when the backend cannot enforce some
	// policy parts; each weakened part is logged as a warning.
	AllowWeaker bool `json:"allow_weaker,omitempty"`
	// Labels are free-form tags kept in State (run ids, tenants).
	Labels map[string]string `json:"labels,omitempty"`
	// Detached makes the session outlive the process that created it
	// (agentbox session create, a server): it lives until Close or Delete.
	// Otherwise the session belongs to that process and ends with it, a
	// crash or a kill -9 included: its processes end and what it holds on
	// the host is removed, with no garbage collection to run.
	Detached bool `json:"detached,omitempty"`
	// Ports are TCP ports on the sandbox's loopback that the host may
	// connect to (a dev server, a notebook): through DialPort, `agentbox
	// session forward`, or the server. Nothing else of the sandbox is
	// reachable from outside, and the ports change nothing about what the
	// sandbox may reach (Policy.Network still holds).
	Ports []int `json:"ports,omitempty"`
}

// DefaultWorkdir is where the workspace appears inside a sandbox.
const DefaultWorkdir = "/workspace"

// DefaultUID and DefaultGID are the unprivileged identity commands run as
// when a Spec names no user.
const (
	DefaultUID = 1000
	DefaultGID = 1000
)

// SnapshotStore saves and restores workspaces. The snapshot package
// provides the on-disk implementation; backends take one as an option.
type SnapshotStore interface {
	// Save stores the tree at dir, skipping the relative paths in exclude
	// (mount points), and returns the snapshot reference. maxBytes, when
	// positive, is the session's disk limit: a tree whose file sizes
	// total more (sparse files at their full size) is refused with
	// ErrInvalid, naming the limit, so a snapshot never holds more than
	// its workspace may.
	Save(ctx context.Context, dir string, exclude []string, maxBytes int64) (string, error)
	// Restore writes the snapshot ref into dir, which must be empty or
	// absent. A snapshot that fails verification restores nothing, nor
	// does one whose file sizes total more than maxBytes (when positive:
	// the disk limit of the session it seeds; ErrInvalid).
	Restore(ctx context.Context, ref, dir string, maxBytes int64) error
}
