package linux

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/agentbox/agentbox/sandbox/linux/control"

	"github.com/agentbox/agentbox/sandbox"
)

// Resume reattaches to a live session through its control socket; when
// the init is gone, it rebuilds the session from the same spec on its
// workspace, or on a fresh workspace seeded from its latest snapshot when
// the workspace is gone too.
func (c *Client) Resume(ctx context.Context, st sandbox.State) (sandbox.Session, error) {
	if st.Backend != c.Name() {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "linux: resume: state is for backend %q", st.Backend)
	}
	if info, err := probe(st.Handles["socket"]); err == nil && info.ID == st.ID {
		if st.Handles["landlock"] == "" && info.Landlock != "" {
			// A state read back from state.json, written before the init
			// had confined its thread.
			st.Handles = maps.Clone(st.Handles)
			st.Handles["landlock"] = info.Landlock
		}
		s := newSession(c, st, c.cg.Open(st.ID))
		if st.Spec.Policy.Network.EffectiveMode() == sandbox.NetworkAllowList {
			if err := s.startEgress(st.Spec.Policy.Network); err != nil {
				return nil, sandbox.Wrap("linux: resume", nil, err)
			}
		}
		return s, nil
	}
	if pid := initPidOf(c, st); initAlive(pid, st.ID) {
		// Alive but not answering: starting (its state is written before
		// it serves) or wedged. Either way not gone, so not rebuilt over.
		return nil, sandbox.Errorf(sandbox.ErrUnavailable, "linux: resume %s: its init (pid %d) is alive but does not answer on %s yet; retry, or Delete it",
			st.ID, pid, st.Handles["socket"])
	}
	// The sandbox is gone: clear what is left of it, keep the workspace.
	keep := st
	keep.OwnsWorkspace = false
	_ = c.Delete(ctx, keep)
	spec := st.Spec
	adopt := false
	if st.Workspace != "" && dirExists(st.Workspace) && st.Handles["disk_image"] == "" {
		spec.Workspace = st.Workspace
		spec.Snapshot = ""
		adopt = st.OwnsWorkspace
	} else {
		spec.Workspace = ""
		spec.Snapshot = st.Snapshot
		if spec.Snapshot == "" {
			return nil, sandbox.Errorf(sandbox.ErrNotFound, "linux: resume %s: the session is gone and left no workspace or snapshot to rebuild from", st.ID)
		}
	}
	s, err := c.create(ctx, spec, c.newID(), adopt)
	if err != nil {
		return nil, sandbox.Wrap("linux: resume "+st.ID, nil, err)
	}
	return s, nil
}

// Delete tears down what st names; what is already gone is skipped.
func (c *Client) Delete(ctx context.Context, st sandbox.State) error {
	if st.Backend != "" && st.Backend != c.Name() {
		return sandbox.Errorf(sandbox.ErrInvalid, "linux: delete: state is for backend %q", st.Backend)
	}
	if st.ID == "" {
		return sandbox.Errorf(sandbox.ErrInvalid, "linux: delete: state has no session id")
	}
	if st.Handles == nil {
		st.Handles = map[string]string{}
	}
	if st.Handles["state_dir"] == "" {
		st.Handles["state_dir"] = c.sessionDir(st.ID)
	}
	if st.Handles["socket"] == "" {
		st.Handles["socket"] = st.Handles["state_dir"] + "/control.sock"
	}
	if st.Handles["init_pid"] == "" {
		if pid := initPidOf(c, st); pid > 0 {
			st.Handles["init_pid"] = strconv.Itoa(pid)
		}
	}
	s := newSession(c, st, c.cg.Open(st.ID))
	s.closed = true
	if err := s.Stop(ctx); err != nil {
		return err
	}
	return c.release(st)
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
		b, err := os.ReadFile(filepath.Join(c.opts.StateDir, e.Name(), "state.json"))
		if err != nil {
			continue
		}
		if st, err := sandbox.UnmarshalState(b); err == nil {
			out = append(out, st)
		}
	}
	return out, nil
}

// Alive reports whether the init of a saved session still serves.
func (c *Client) Alive(st sandbox.State) bool {
	info, err := probe(st.Handles["socket"])
	return err == nil && info.ID == st.ID
}

// initPidOf is the pid of st's init: from its handles, else from the
// state.json its session directory holds (written as the init starts);
// 0 when neither says.
func initPidOf(c *Client, st sandbox.State) int {
	if n, err := strconv.Atoi(st.Handles["init_pid"]); err == nil {
		return n
	}
	dir := st.Handles["state_dir"]
	if dir == "" {
		dir = c.sessionDir(st.ID)
	}
	b, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		return 0
	}
	saved, err := sandbox.UnmarshalState(b)
	if err != nil || saved.ID != st.ID {
		return 0
	}
	n, _ := strconv.Atoi(saved.Handles["init_pid"])
	return n
}
