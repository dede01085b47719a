package local

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/owned"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/wsfs"
)

// session is one local sandbox: a workspace directory and the process
// groups started in it.
type session struct {
	c       *Client
	who     identity
	workdir string // the sandbox path the workspace appears at
	root    *wsfs.Root

	mu       sync.Mutex
	st       sandbox.State
	procs    map[*process]struct{} // started and not yet known dead
	stopped  bool
	closed   bool
	expired  bool
	deadline *time.Timer // session timeout
	watches  wsfs.Watches
	// The idle timeout (idle.go): idle ends the session once running,
	// the commands started and not yet exited, stays 0 that long.
	idle      *time.Timer
	idleSince time.Time
	running   int
	idled     bool
}

func (c *Client) open(st sandbox.State, missing []sandbox.Part) (*session, error) {
	ws, err := owned.Open(st.Workspace)
	if err != nil {
		return nil, sandbox.Wrap("local: open workspace", nil, err)
	}
	who, err := sessionUser(st.Spec.User, ws)
	ws.Close()
	if err != nil {
		return nil, err
	}
	root, err := wsfs.Open(st.Workspace)
	if err != nil {
		return nil, sandbox.Wrap("local: open workspace", nil, err)
	}
	if st.CreatedAt.IsZero() {
		st.CreatedAt = time.Now().UTC()
	}
	s := &session{
		c:       c,
		who:     who,
		workdir: st.Spec.Workdir,
		root:    root,
		st:      st,
		procs:   map[*process]struct{}{},
	}
	if s.workdir == "" {
		s.workdir = sandbox.DefaultWorkdir
	}
	// The session timeout counts from when this process opened the
	// session: a resumed session gets the whole timeout again.
	if t := st.Spec.Policy.Resources.SessionTimeout; t > 0 {
		s.deadline = time.AfterFunc(t, s.expire)
	}
	if t := st.Spec.Policy.Resources.IdleTimeout; t > 0 {
		s.idleSince = time.Now()
		s.idle = time.AfterFunc(t, s.idleOut)
	}
	s.warn(missing)
	c.track(s)
	return s, nil
}

// warn prints, once per session, that nothing is confined.
func (s *session) warn(missing []sandbox.Part) {
	uid := os.Geteuid()
	if s.who.set {
		uid = s.who.uid
	}
	names := make([]string, len(missing))
	for i, m := range missing {
		names[i] = string(m)
	}
	notEnforced := "none requested"
	if len(names) > 0 {
		notEnforced = strings.Join(names, ", ")
	}
	fmt.Fprintf(s.c.warn, "agentbox: WARNING: backend local confines NOTHING: session %s runs commands directly on this host as uid %d, with the whole filesystem, network and processes in reach (workspace %s); only timeouts and the output cap apply; not enforced: %s\n",
		s.st.ID, uid, s.st.Workspace, notEnforced)
}

func (s *session) ID() string { return s.st.ID }

func (s *session) State() sandbox.State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st
}

// usable reports why the session cannot start commands, if it cannot.
func (s *session) usable(op string) error {
	switch {
	case s.closed:
		return sandbox.Wrap("local: "+op, sandbox.ErrClosed, fmt.Errorf("session %s is closed", s.st.ID))
	case s.stopped:
		return sandbox.Wrap("local: "+op, sandbox.ErrClosed, fmt.Errorf("session %s was stopped; resume it to run commands", s.st.ID))
	case s.expired:
		return sandbox.Wrap("local: "+op, sandbox.ErrTimeout, fmt.Errorf("session %s passed its timeout of %s", s.st.ID, s.st.Spec.Policy.Resources.SessionTimeout))
	case s.idled:
		return sandbox.Wrap("local: "+op, sandbox.ErrGone, fmt.Errorf("session %s ended after %s idle (its idle timeout)", s.st.ID, s.st.Spec.Policy.Resources.IdleTimeout))
	}
	return nil
}

// rel maps a sandbox path to a workspace-relative one.
func (s *session) rel(p string) (string, error) {
	return sandbox.ResolveWorkspacePath(s.workdir, p)
}

// hostDir maps an ExecRequest.Workdir to a host directory: sandbox paths
// under the workdir map into the workspace; other absolute paths are host
// paths, since local commands see the host as it is.
func (s *session) hostDir(wd string) (string, error) {
	if wd == "" {
		return s.st.Workspace, nil
	}
	if path.IsAbs(wd) {
		clean := path.Clean(wd)
		if clean != s.workdir && !strings.HasPrefix(clean, strings.TrimSuffix(s.workdir, "/")+"/") {
			return clean, nil
		}
	}
	rel, err := s.rel(wd)
	if err != nil {
		return "", err
	}
	return filepath.Join(s.st.Workspace, rel), nil
}

func (s *session) Start(ctx context.Context, req sandbox.ExecRequest) (sandbox.Process, error) {
	p, err := s.start(ctx, req)
	if err != nil {
		return nil, err
	}
	if req.Stdin != nil {
		sandbox.FeedStdin(p, req.Stdin)
	}
	return p, nil
}

func (s *session) ReadFile(ctx context.Context, p string) ([]byte, error) {
	return s.readFile(p, 0)
}

// ReadFileLimit reads a file of at most max bytes, refusing a larger one
// before reading it (sandbox.LimitedReader).
func (s *session) ReadFileLimit(ctx context.Context, p string, max int64) ([]byte, error) {
	if max < 1 {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "local: read %s: a read limit of %d bytes; give one of at least 1", p, max)
	}
	return s.readFile(p, max)
}

// readFile reads p; max > 0 bounds its size.
func (s *session) readFile(p string, max int64) ([]byte, error) {
	rel, err := s.rel(p)
	if err != nil {
		return nil, err
	}
	if err := s.filesUsable("read file"); err != nil {
		return nil, err
	}
	return s.root.ReadFile(rel, max)
}

func (s *session) WriteFile(ctx context.Context, p string, data []byte, mode fs.FileMode) error {
	rel, err := s.rel(p)
	if err != nil {
		return err
	}
	if err := s.filesUsable("write file"); err != nil {
		return err
	}
	return s.root.WriteFile(rel, data, mode, s.who.uid, s.who.gid)
}

func (s *session) ListDir(ctx context.Context, p string) ([]sandbox.FileInfo, error) {
	rel, err := s.rel(p)
	if err != nil {
		return nil, err
	}
	if err := s.filesUsable("list directory"); err != nil {
		return nil, err
	}
	return s.root.ListDir(rel)
}

// filesUsable refuses file access after Close (the workspace may be gone);
// a stopped or expired session still serves its files.
func (s *session) filesUsable(op string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return sandbox.Wrap("local: "+op, sandbox.ErrClosed, fmt.Errorf("session %s is closed", s.st.ID))
	}
	return nil
}

func (s *session) Snapshot(ctx context.Context) (string, error) {
	store := s.c.opts.Snapshots
	if store == nil {
		return "", sandbox.Errorf(sandbox.ErrInvalid, "local: snapshot session %s: no snapshot store is configured", s.st.ID)
	}
	if err := s.filesUsable("snapshot"); err != nil {
		return "", err
	}
	ref, err := store.Save(ctx, s.st.Workspace, nil, s.st.Spec.Policy.Resources.DiskBytes)
	if err != nil {
		return "", sandbox.Wrap("local: snapshot workspace "+s.st.Workspace, nil, err)
	}
	s.mu.Lock()
	s.st.Snapshot = ref
	s.mu.Unlock()
	return ref, nil
}

// Stop kills every process group the session started and keeps the
// workspace, so that Resume can open it again.
func (s *session) Stop(ctx context.Context) error {
	s.mu.Lock()
	s.stopped = true
	if s.deadline != nil {
		s.deadline.Stop()
	}
	if s.idle != nil {
		s.idle.Stop()
	}
	procs := s.takeProcs()
	s.mu.Unlock()
	return killAll(procs, false)
}

// Close kills every process group, releases their descriptors and removes
// the workspace when the session created it. It is idempotent.
func (s *session) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	if s.deadline != nil {
		s.deadline.Stop()
	}
	if s.idle != nil {
		s.idle.Stop()
	}
	procs := s.takeProcs()
	s.mu.Unlock()
	s.c.untrack(s)
	s.watches.End()
	err := killAll(procs, true)
	if cerr := s.root.Close(); err == nil {
		err = cerr
	}
	if s.st.OwnsWorkspace {
		if rerr := os.RemoveAll(s.st.Workspace); rerr != nil && err == nil {
			err = sandbox.Wrap("local: remove workspace "+s.st.Workspace, nil, rerr)
		}
	}
	return err
}

// expire ends the session when its timeout passes.
func (s *session) expire() {
	s.mu.Lock()
	s.expired = true
	procs := s.takeProcs()
	s.mu.Unlock()
	for _, p := range procs {
		p.sessionKilled.Store(true)
	}
	_ = killAll(procs, false)
}

// takeProcs empties the process set; s.mu must be held.
func (s *session) takeProcs() []*process {
	out := make([]*process, 0, len(s.procs))
	for p := range s.procs {
		out = append(out, p)
	}
	clear(s.procs)
	return out
}

// killAll kills each process group; release also closes their streams.
func killAll(procs []*process, release bool) error {
	var first error
	for _, p := range procs {
		if err := p.killGroup(); err != nil && first == nil {
			first = err
		}
		if release {
			p.release()
		}
	}
	return first
}

// prune forgets processes whose leader has exited and whose group is
// empty, so that a long session does not accumulate dead groups (and never
// signals a process group id the kernel has since reused); s.mu must be held.
func (s *session) prune() {
	for p := range s.procs {
		select {
		case <-p.done:
			if unix.Kill(-p.pgid, 0) == unix.ESRCH {
				delete(s.procs, p)
			}
		default:
		}
	}
}
