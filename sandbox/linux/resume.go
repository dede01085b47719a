package linux

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/linux/control"
	"golang.org/x/sys/unix"
)

// Resume reattaches to a live session through its control socket, from
// this or another process. A session whose init is gone is ErrGone;
// Rebuild makes a new one from what it left.
func (c *Client) Resume(ctx context.Context, st sandbox.State) (sandbox.Session, error) {
	const op = "linux: resume"
	h, err := c.stateOf(st)
	if err != nil {
		return nil, err
	}
	g := c.cg.Open(st.ID)
	// A paused session's init is frozen and cannot answer a probe; its
	// group says it is paused, and a live init says it is there.
	paused, _ := g.Frozen()
	info, err := &control.Info{}, error(nil)
	if !paused {
		info, err = probe(h.Socket)
	}
	if (paused && initAlive(h.InitPID, st.ID)) || (err == nil && info.ID == st.ID) {
		if h.Landlock == "" {
			// A state read back from state.json, written before the init
			// had confined its thread.
			h.Landlock = info.Landlock
		}
		s := newSession(c, st, h, g)
		if st.Spec.Policy.Network.EffectiveMode() == sandbox.NetworkAllowList {
			if err := s.startEgress(st.Spec.Policy.Network); err != nil {
				return nil, sandbox.Wrap(op, nil, err)
			}
		}
		return s, nil
	}
	if initAlive(h.InitPID, st.ID) {
		// Alive but not answering: starting (its state is written before
		// it serves) or wedged. Either way not gone.
		return nil, &sandbox.Error{Op: op, Kind: sandbox.ErrUnavailable, Retryable: true,
			Err: fmt.Errorf("session %s: its init (pid %d) is alive but does not answer on %s yet; retry, or Delete it", st.ID, h.InitPID, h.Socket)}
	}
	return nil, sandbox.Wrap(op, sandbox.ErrGone, fmt.Errorf("session %s no longer runs (its init is gone); Rebuild makes a new session from its workspace or snapshot", st.ID))
}

// Rebuild makes a new session with the spec of the gone session st, on
// its workspace when that is still there (adopting it when the old
// session owned it), else on a fresh workspace seeded from its latest
// snapshot. What is left of the old session is cleared first.
func (c *Client) Rebuild(ctx context.Context, st sandbox.State) (sandbox.Session, error) {
	op := "linux: rebuild " + st.ID
	h, err := c.stateOf(st)
	if err != nil {
		return nil, err
	}
	if c.Alive(st) || initAlive(h.InitPID, st.ID) {
		return nil, sandbox.Wrap(op, sandbox.ErrInvalid, errors.New("the session still runs: Resume it, or Delete it before a rebuild"))
	}
	if st.OwnsWorkspace && st.Workspace != "" && dirExists(st.Workspace) {
		// From the removal of the gone session's directory below until
		// the new one's exists, no state names the workspace: gc, which
		// would take it for a remain, waits on this lock (remains.go).
		unlock, err := lockDir(filepath.Dir(st.Workspace), unix.LOCK_SH)
		if err != nil {
			return nil, sandbox.Wrap(op, nil, err)
		}
		defer unlock()
	}
	keep := st
	keep.OwnsWorkspace = false
	if err := c.Delete(ctx, keep); err != nil {
		return nil, sandbox.Wrap(op, nil, fmt.Errorf("clear what is left of it: %w", err))
	}
	spec := st.Spec
	var adopt *adoption
	if st.Workspace != "" && dirExists(st.Workspace) && h.DiskImage == "" {
		spec.Workspace = st.Workspace
		spec.Snapshot = ""
		if st.OwnsWorkspace {
			adopt = &adoption{tmpfs: h.WorkspaceTmpfs}
		}
	} else {
		spec.Workspace = ""
		spec.Snapshot = st.Snapshot
		if spec.Snapshot == "" {
			return nil, sandbox.Wrap(op, sandbox.ErrNotFound, errors.New("it left no workspace or snapshot to rebuild from"))
		}
	}
	s, err := c.create(ctx, spec, c.newID(), adopt)
	if err != nil {
		return nil, sandbox.Wrap(op, nil, err)
	}
	from := "its workspace"
	if spec.Snapshot != "" {
		from = "snapshot " + spec.Snapshot
	}
	c.log.Info("linux session rebuilt", "gone", st.ID, "new", s.ID(), "from", from)
	return s, nil
}

// stateOf checks that st is this backend's and reads its handles, with
// the defaults of a session of this client filled in.
func (c *Client) stateOf(st sandbox.State) (handles, error) {
	if st.Backend != "" && st.Backend != c.Name() {
		return handles{}, sandbox.Errorf(sandbox.ErrInvalid, "linux: state %s is for backend %q", st.ID, st.Backend)
	}
	if st.ID == "" {
		return handles{}, sandbox.Errorf(sandbox.ErrInvalid, "linux: state has no session id")
	}
	h, err := decodeHandles(st)
	if err != nil {
		return handles{}, err
	}
	return c.withDefaults(st, h), nil
}

// Delete tears down what st names; what is already gone is skipped.
func (c *Client) Delete(ctx context.Context, st sandbox.State) error {
	h, err := c.stateOf(st)
	if err != nil {
		return err
	}
	if st.Workspace == "" {
		// A state that names only the session: what it holds is what its
		// state.json says, or, when its maker died before writing one,
		// what the backend makes where it makes it.
		if saved, err := readState(h.StateDir); err == nil && saved.ID == st.ID {
			st.Workspace, st.OwnsWorkspace = saved.Workspace, saved.OwnsWorkspace
		} else if ws := c.defaultWorkspace(st.ID); dirExists(ws) {
			st.Workspace, st.OwnsWorkspace = ws, true
			h.WorkspaceTmpfs = mountedOn(ws)
			if img := filepath.Join(h.StateDir, "disk.img"); fileExists(img) {
				h.DiskImage = img
			}
		}
	}
	if h.IDBase == 0 && !c.rootless {
		// Claimed, perhaps, before state.json said which.
		c.slots.releaseDir(h.StateDir)
	}
	s := newSession(c, st, h, c.cg.Open(st.ID))
	s.closed = true
	if err := s.Stop(ctx); err != nil {
		return err
	}
	if err := c.release(st, h); err != nil {
		return err
	}
	c.disown(st.ID)
	return nil
}

// probe asks an init who it is; it fails when nothing serves the socket.
func probe(sock string) (*control.Info, error) {
	if sock == "" {
		return nil, fmt.Errorf("no control socket")
	}
	conn, err := control.Dial(sock)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if err := control.Send(conn, control.Request{Op: control.OpInfo}); err != nil {
		return nil, err
	}
	var r control.Reply
	if _, err := control.Recv(conn, &r, control.MaxReply); err != nil {
		return nil, err
	}
	if r.Info == nil {
		return nil, fmt.Errorf("init answered without info: %s", r.Error)
	}
	return r.Info, nil
}

func dirExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

func fileExists(p string) bool {
	fi, err := os.Lstat(p)
	return err == nil && fi.Mode().IsRegular()
}

// mountedOn reports whether a file system is mounted on dir: it is on
// another one than its parent.
func mountedOn(dir string) bool {
	var st, parent unix.Stat_t
	if unix.Lstat(dir, &st) != nil || unix.Lstat(filepath.Dir(dir), &parent) != nil {
		return false
	}
	return st.Dev != parent.Dev
}

// List returns the saved state of every session in the state directory,
// live or not, so that tools can resume or delete (garbage-collect) them.
func (c *Client) List() ([]sandbox.State, error) {
	entries, err := os.ReadDir(c.opts.StateDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, sandbox.Wrap("linux: list sessions", nil, err)
	}
	var out []sandbox.State
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if st, err := readState(c.sessionDir(e.Name())); err == nil && st.ID == e.Name() {
			out = append(out, st)
		}
	}
	return out, nil
}

// Alive reports whether the init of a saved session still serves.
func (c *Client) Alive(st sandbox.State) bool {
	h, err := c.stateOf(st)
	if err != nil {
		return false
	}
	if frozen, _ := c.cg.Open(st.ID).Frozen(); frozen {
		return initAlive(h.InitPID, st.ID) // paused: the init cannot answer
	}
	info, err := probe(h.Socket)
	return err == nil && info.ID == st.ID
}
