// Package local is agentbox's unconfined backend, for development on hosts
// without namespaces. Commands run directly on the host, in the workspace
// directory, as its owner (the rule every backend keeps: what a session
// creates belongs to the directory's owner), which only root can switch
// to, so without root only the caller's own directories are accepted:
// they see the whole host filesystem, network and processes. It enforces only per-exec timeouts (each command
// runs in its own process group, killed as a group) and the output cap, and
// refuses every other policy part unless the caller allows a weaker
// sandbox, in which case it says loudly, once per session, that it confines
// nothing.
//
// Even the timeout is best effort against an adversary: a grandchild that
// calls setsid(2) or setpgid(2) leaves the process group and survives the
// kill. That is why this backend is called unconfined.
package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/agentbox/agentbox/sandbox"
)

// Options configure the local backend.
type Options struct {
	// Snapshots stores workspace snapshots; nil disables Snapshot and
	// seeding from one.
	Snapshots sandbox.SnapshotStore
	// Logger receives the weakened-policy warnings; default slog.Default().
	Logger *slog.Logger
	// Warn receives the one-line "confines NOTHING" warning each session
	// prints; default os.Stderr.
	Warn io.Writer
}

// Client is the local backend.
type Client struct {
	opts Options
	log  *slog.Logger
	warn io.Writer

	mu       sync.Mutex
	sessions map[string]*session // live sessions, so Delete can end them
}

// New returns the local backend. It needs nothing from the host.
func New(opts Options) (*Client, error) {
	c := &Client{opts: opts, log: opts.Logger, warn: opts.Warn, sessions: map[string]*session{}}
	if c.log == nil {
		c.log = slog.Default()
	}
	if c.warn == nil {
		c.warn = os.Stderr
	}
	return c, nil
}

// Name is "local".
func (c *Client) Name() string { return "local" }

// enforced are the only parts this backend enforces.
var enforced = []sandbox.Part{sandbox.PartTimeout, sandbox.PartOutput, sandbox.PartIdleTimeout}

// Enforces lists the per-exec timeout and the output cap: nothing else.
func (c *Client) Enforces() []sandbox.Part { return append([]sandbox.Part(nil), enforced...) }

// Create starts a session on spec.Workspace (or on a fresh temporary
// directory it removes on Close), seeded from spec.Snapshot when set.
func (c *Client) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Session, error) {
	missing, err := c.admit(spec)
	if err != nil {
		return nil, err
	}
	id, err := newID()
	if err != nil {
		return nil, sandbox.Wrap("local: create", nil, err)
	}
	st := sandbox.State{
		Version: sandbox.StateVersion,
		Backend: c.Name(),
		ID:      id,
		Spec:    spec,
	}
	ws, owns, err := c.prepareWorkspace(ctx, spec, id)
	if err != nil {
		return nil, err
	}
	st.Workspace, st.OwnsWorkspace = ws, owns
	st.Snapshot = spec.Snapshot
	s, err := c.open(st, missing)
	if err != nil {
		if owns {
			os.RemoveAll(ws)
		}
		return nil, err
	}
	return s, nil
}

// Resume opens the session again on st's workspace, under its id: a
// local session is its workspace (its processes never outlive the
// client that ran them). A session whose workspace is gone is ErrGone.
func (c *Client) Resume(ctx context.Context, st sandbox.State) (sandbox.Session, error) {
	if st.Backend != c.Name() {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "local: resume: state is for backend %q", st.Backend)
	}
	missing, err := c.admit(st.Spec)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(st.Workspace); st.Workspace == "" || err != nil || !fi.IsDir() {
		return nil, sandbox.Errorf(sandbox.ErrGone, "local: resume %s: its workspace %q is gone; Rebuild makes a new session from its snapshot", st, st.Workspace)
	}
	return c.open(st, missing)
}

// Rebuild makes a new session, under a new id, on st's workspace when it
// still exists, else on a workspace rebuilt from st's latest snapshot
// (where the caller's directory was, or a fresh one).
func (c *Client) Rebuild(ctx context.Context, st sandbox.State) (sandbox.Session, error) {
	if st.Backend != c.Name() {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "local: rebuild: state is for backend %q", st.Backend)
	}
	missing, err := c.admit(st.Spec)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	live := c.sessions[st.ID] != nil
	c.mu.Unlock()
	if live {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "local: rebuild %s: the session is still open in this client: use it, or Close it first", st)
	}
	id, err := newID()
	if err != nil {
		return nil, sandbox.Wrap("local: rebuild", nil, err)
	}
	old := st.ID
	st.ID, st.Version, st.CreatedAt = id, sandbox.StateVersion, time.Now().UTC()
	if fi, err := os.Stat(st.Workspace); st.Workspace != "" && err == nil && fi.IsDir() {
		return c.open(st, missing)
	}
	if st.Snapshot == "" {
		return nil, sandbox.Errorf(sandbox.ErrNotFound, "local: rebuild %s: workspace %q is gone and there is no snapshot to rebuild it from", old, st.Workspace)
	}
	spec := st.Spec
	spec.Workspace = ""
	if !st.OwnsWorkspace {
		// The caller's directory went away: rebuild it where it was.
		spec.Workspace = st.Workspace
	}
	spec.Snapshot = st.Snapshot
	ws, owns, err := c.prepareWorkspace(ctx, spec, st.ID)
	if err != nil {
		return nil, err
	}
	st.Workspace, st.OwnsWorkspace = ws, owns
	s, err := c.open(st, missing)
	if err != nil && owns {
		os.RemoveAll(ws)
	}
	return s, err
}

// Delete ends the session st names if it lives in this client, and removes
// its workspace when the session created it.
func (c *Client) Delete(ctx context.Context, st sandbox.State) error {
	c.mu.Lock()
	s := c.sessions[st.ID]
	c.mu.Unlock()
	if s != nil {
		if err := s.Close(ctx); err != nil {
			return err
		}
	}
	if st.OwnsWorkspace && st.Workspace != "" {
		if err := os.RemoveAll(st.Workspace); err != nil {
			return sandbox.Wrap("local: delete workspace "+st.Workspace, nil, err)
		}
	}
	return nil
}

// admit validates spec and checks its policy against what this backend
// enforces; it returns the parts that will not be enforced.
func (c *Client) admit(spec sandbox.Spec) ([]sandbox.Part, error) {
	if len(spec.Mounts) > 0 {
		return nil, &sandbox.Error{Op: "local: create", Kind: sandbox.ErrPolicyUnsupported,
			Err: fmt.Errorf("cannot bind mounts (%s onto %s): the local backend has no mount namespace", spec.Mounts[0].Source, spec.Mounts[0].Target)}
	}
	if _, err := parseUser(spec.User); err != nil {
		return nil, err
	}
	if err := sandbox.CheckPorts(spec.Ports); err != nil {
		return nil, sandbox.Wrap("local: create", sandbox.ErrInvalid, err)
	}
	missing, err := sandbox.Check(c.Name(), enforced, spec.Policy, spec.AllowWeaker, c.log)
	if err != nil {
		return nil, err
	}
	return missing, nil
}

func (c *Client) track(s *session) {
	c.mu.Lock()
	c.sessions[s.st.ID] = s
	c.mu.Unlock()
}

func (c *Client) untrack(s *session) {
	c.mu.Lock()
	if c.sessions[s.st.ID] == s {
		delete(c.sessions, s.st.ID)
	}
	c.mu.Unlock()
}

func newID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("session id: %w", err)
	}
	return "local-" + hex.EncodeToString(b[:]), nil
}
