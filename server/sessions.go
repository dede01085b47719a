package server

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentbox/agentbox/manifest"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/server/api"
	"github.com/agentbox/agentbox/trace"
)

// live is a session the server knows: its registry row and, unless its
// sandbox is gone, the session.
type live struct {
	mu   sync.Mutex
	rec  SessionRecord
	sess sandbox.Session
	// lastUsed is the Unix nanosecond time of the last request on it.
	lastUsed atomic.Int64
	procs    processes

	// tw writes its trace to tf (see trace.go).
	tmu sync.Mutex
	tw  *trace.Writer
	tf  *os.File
}

func (l *live) touch(now time.Time) { l.lastUsed.Store(now.UnixNano()) }

// holds is what l holds of its tenant's quota: nothing once gone.
func (l *live) holds() (sandbox.Resources, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rec.State.Spec.Policy.Resources, l.sess != nil
}

// list is the tenant's sessions sorted by creation.
func (t *tenant) list() []*live {
	t.mu.Lock()
	out := make([]*live, 0, len(t.sessions))
	for _, l := range t.sessions {
		out = append(out, l)
	}
	t.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].rec.CreatedAt.Before(out[j].rec.CreatedAt) })
	return out
}

// lookup finds the tenant's session id. Another tenant's session is not
// in t.sessions at all: it is not found, as an unknown id.
func (t *tenant) lookup(id string) (*live, error) {
	t.mu.Lock()
	l, ok := t.sessions[id]
	t.mu.Unlock()
	if !ok {
		return nil, sandbox.Errorf(sandbox.ErrNotFound, "session %q not found", id)
	}
	return l, nil
}

// running is the live session of l, or ErrGone.
func (l *live) running() (sandbox.Session, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sess == nil {
		return nil, sandbox.Errorf(sandbox.ErrGone, "session %s: its sandbox is gone; rebuild it (POST .../rebuild) or delete it", l.rec.State.ID)
	}
	return l.sess, nil
}

// use finds a running session of the tenant and marks it used.
func (s *Server) use(t *tenant, id string) (*live, sandbox.Session, error) {
	l, err := t.lookup(id)
	if err != nil {
		return nil, nil, err
	}
	sess, err := l.running()
	if err != nil {
		return nil, nil, err
	}
	l.touch(s.opts.Now())
	return l, sess, nil
}

// checked is err, after marking l gone when err says its sandbox is (it
// was killed from outside): from then on l answers 410 until it is
// rebuilt or deleted.
func (s *Server) checked(l *live, err error) error {
	if err == nil || !errors.Is(err, sandbox.ErrGone) {
		return err
	}
	l.mu.Lock()
	if l.sess != nil {
		l.rec.State = l.sess.State()
		l.rec.Gone = true
		l.sess = nil
	}
	rec := l.rec
	l.mu.Unlock()
	s.log.Warn("session found gone", "tenant", rec.Tenant, "session", rec.State.ID, "err", err)
	l.emit(trace.Event{Type: trace.Error, Err: "the sandbox is gone: " + err.Error()})
	if perr := s.reg.PutSession(rec); perr != nil {
		return errors.Join(err, perr)
	}
	return err
}

// create makes a session for tenant t from an untrusted request.
func (s *Server) create(ctx context.Context, t *tenant, req api.CreateSession) (*live, error) {
	sp := req.Spec
	if err := t.admit(&sp); err != nil {
		return nil, err
	}
	if sp.Snapshot != "" && !s.reg.HasSnapshot(t.name, sp.Snapshot) {
		return nil, sandbox.Errorf(sandbox.ErrNotFound, "snapshot %q not found", sp.Snapshot)
	}
	how := "create"
	if sp.Snapshot != "" {
		how = "create from snapshot " + sp.Snapshot
	}
	if req.Manifest != nil {
		how = "create from a manifest"
	}
	// The manifest is written only once the quota has room for the
	// session: a tenant at its limit makes the server copy nothing.
	var owned string
	l, err := s.start(ctx, t, how, sp, time.Duration(req.TTL), time.Duration(req.IdleTimeout), func(ctx context.Context) (sandbox.Session, string, error) {
		sp := sp
		if req.Manifest != nil {
			ws, err := s.materialize(ctx, t, req.Manifest, &sp)
			if err != nil {
				return nil, "", err
			}
			owned = ws
		}
		sess, err := t.client.Create(ctx, sp)
		return sess, owned, err
	})
	if err != nil && owned != "" {
		_ = os.RemoveAll(owned)
	}
	return l, err
}

// materialize writes an untrusted manifest into a workspace the server
// makes under the tenant's directory and points sp at it (its mounts,
// environment, user and workdir included). The manifest's host sources
// must lie under the tenant's host base (none at all when there is
// none), and it may carry no grants: Validate refuses both, with every
// problem named, before anything is written.
func (s *Server) materialize(ctx context.Context, t *tenant, m *manifest.Manifest, sp *sandbox.Spec) (string, error) {
	if sp.Workspace != "" || sp.Snapshot != "" {
		return "", sandbox.Errorf(sandbox.ErrInvalid, "manifest: the server makes the workspace a manifest fills; leave spec.workspace and spec.snapshot empty")
	}
	opts := manifest.ValidateOptions{Base: t.limits.HostBase}
	if err := m.Validate(opts); err != nil {
		return "", err
	}
	dir := filepath.Join(s.opts.Data, "tenants", t.name, "workspaces")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	ws, err := os.MkdirTemp(dir, "ws-")
	if err != nil {
		return "", err
	}
	// Entered by the sandbox's ids, which the backend maps to the
	// workspace's owner (the server's).
	if err := os.Chmod(ws, 0o755); err != nil {
		os.RemoveAll(ws)
		return "", err
	}
	uid, gid, err := manifest.OwnerOf(ws)
	if err == nil {
		var mat *manifest.Materialized
		mat, err = m.Materialize(ctx, ws, manifest.MaterializeOptions{Base: opts.Base, UID: uid, GID: gid})
		if err == nil {
			sp.Workspace = ws
			sp.Workdir = m.EffectiveRoot()
			sp.Mounts = append(mat.Mounts, sp.Mounts...)
			env := maps.Clone(mat.Env)
			maps.Copy(env, sp.Env)
			sp.Env = env
			if sp.User == "" {
				sp.User = mat.User
			}
		}
	}
	if err != nil {
		os.RemoveAll(ws)
		return "", err
	}
	return ws, nil
}

// start runs make within the tenant's quota for a session of spec sp and
// registers what it made, with the workspace directory the server made
// for it when make returns one (removed with the record). Nothing is left
// when it fails: the quota is given back, and a session that cannot be
// registered is closed.
func (s *Server) start(ctx context.Context, t *tenant, how string, sp sandbox.Spec, ttl, idle time.Duration, make func(context.Context) (sandbox.Session, string, error)) (*live, error) {
	t.mu.Lock()
	err := t.reserveLocked(sp)
	t.mu.Unlock()
	if err != nil {
		return nil, err
	}
	r := sp.Policy.Resources
	defer func() {
		t.mu.Lock()
		t.pending.add(-r.MemoryBytes, -r.CPUs, -1)
		t.mu.Unlock()
	}()
	sess, owned, err := make(ctx)
	if err != nil {
		return nil, err
	}
	now := s.opts.Now().UTC()
	if idle <= 0 {
		idle = t.limits.IdleTimeout
	}
	rec := SessionRecord{Tenant: t.name, State: sess.State(), CreatedAt: now, IdleTimeout: idle, Workspace: owned}
	if d := t.ttl(ttl); d > 0 {
		rec.ExpiresAt = now.Add(d)
	}
	if err := s.reg.PutSession(rec); err != nil {
		_ = sess.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	l := &live{rec: rec, sess: sess}
	l.touch(now)
	s.openTrace(l)
	l.emit(trace.Event{Type: trace.RunStart, Agent: "serve", Session: rec.State.ID, Input: how})
	t.mu.Lock()
	t.sessions[sess.ID()] = l
	t.mu.Unlock()
	return l, nil
}

// deleteSession ends l's session (or clears what a gone one left) and
// removes its row.
func (s *Server) deleteSession(ctx context.Context, t *tenant, l *live, why string) error {
	l.mu.Lock()
	sess := l.sess
	l.sess = nil
	st := l.rec.State
	l.mu.Unlock()
	l.procs.killAll(ctx)
	var err error
	if sess != nil {
		err = sess.Close(ctx)
	} else {
		err = t.client.Delete(ctx, st)
	}
	if err != nil {
		return err
	}
	l.endTrace(why)
	t.mu.Lock()
	delete(t.sessions, st.ID)
	t.mu.Unlock()
	if err := s.reg.DeleteSession(t.name, st.ID); err != nil {
		return err
	}
	if l.rec.Workspace != "" {
		// The manifest's workspace, made by the server: the backend
		// never owned it.
		return os.RemoveAll(l.rec.Workspace)
	}
	return nil
}

// stop ends l's processes, keeping its workspace and snapshot for a
// rebuild: the session is gone from then on.
func (s *Server) stop(ctx context.Context, l *live) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sess == nil {
		return nil
	}
	l.procs.killAll(ctx)
	if err := l.sess.Stop(ctx); err != nil {
		return err
	}
	l.rec.State = l.sess.State()
	l.rec.Gone = true
	l.sess = nil
	l.emit(trace.Event{Type: trace.ToolCall, Tool: "stop"})
	return s.reg.PutSession(l.rec)
}

// rebuild makes a new session from what the gone session l left, and
// forgets l.
func (s *Server) rebuild(ctx context.Context, t *tenant, l *live) (*live, error) {
	l.mu.Lock()
	gone := l.sess == nil
	st := l.rec.State
	l.mu.Unlock()
	if !gone {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "session %s still runs: only a gone session is rebuilt", st.ID)
	}
	sp := st.Spec
	sp.Snapshot = st.Snapshot
	nl, err := s.start(ctx, t, "rebuild of "+st.ID, sp, time.Until(l.rec.ExpiresAt), l.rec.IdleTimeout, func(ctx context.Context) (sandbox.Session, string, error) {
		sess, err := t.client.Rebuild(ctx, st)
		return sess, l.rec.Workspace, err
	})
	if err != nil {
		return nil, err
	}
	l.endTrace("rebuilt as " + nl.rec.State.ID)
	t.mu.Lock()
	delete(t.sessions, st.ID)
	t.mu.Unlock()
	return nl, s.reg.DeleteSession(t.name, st.ID)
}

// snapshot saves l's workspace to the tenant's store and indexes it.
func (s *Server) snapshot(ctx context.Context, t *tenant, l *live, sess sandbox.Session) (string, error) {
	ref, err := sess.Snapshot(ctx)
	if err != nil {
		return "", err
	}
	if err := s.reg.PutSnapshot(SnapshotRecord{Tenant: t.name, ID: ref, Session: sess.ID(), CreatedAt: s.opts.Now().UTC()}); err != nil {
		return "", err
	}
	l.mu.Lock()
	l.rec.State = sess.State()
	rec := l.rec
	l.mu.Unlock()
	l.emit(trace.Event{Type: trace.ToolCall, Tool: "snapshot", Output: ref})
	return ref, s.reg.PutSession(rec)
}

// view is what the API shows of l. Whether it is paused is asked of the
// backend each time: the freeze lives in the kernel or the engine, and
// another program may have paused it.
func (l *live) view(ctx context.Context) api.Session {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.rec.State
	if l.sess != nil {
		st = l.sess.State()
	}
	v := api.Session{ID: st.ID, Status: api.StatusRunning, Backend: st.Backend, CreatedAt: l.rec.CreatedAt,
		ExpiresAt: l.rec.ExpiresAt, IdleTimeout: api.Duration(l.rec.IdleTimeout), Snapshot: st.Snapshot, Spec: st.Spec,
		Workspace: st.Workspace, OwnsWorkspace: st.OwnsWorkspace}
	if l.sess == nil {
		v.Status = api.StatusGone
	} else if paused, err := sandbox.Paused(ctx, l.sess); err == nil && paused {
		v.Status = api.StatusPaused
	}
	return v
}

// reap deletes the sessions whose TTL or idle timeout passed.
func (s *Server) reap(ctx context.Context) {
	now := s.opts.Now()
	s.mu.Lock()
	tenants := make([]*tenant, 0, len(s.tenants))
	for _, t := range s.tenants {
		tenants = append(tenants, t)
	}
	s.mu.Unlock()
	for _, t := range tenants {
		for _, l := range t.list() {
			why := ""
			switch {
			case !l.rec.ExpiresAt.IsZero() && now.After(l.rec.ExpiresAt):
				why = "ttl"
			case l.rec.IdleTimeout > 0 && l.procs.count() == 0 && now.Sub(time.Unix(0, l.lastUsed.Load())) > l.rec.IdleTimeout:
				why = "idle"
			default:
				continue
			}
			err := s.deleteSession(ctx, t, l, "reaped: "+why)
			if err == nil {
				s.metrics.reaped.WithLabelValues(t.name, why).Inc()
			}
			s.log.Info("audit", "tenant", t.name, "session", l.rec.State.ID, "action", "reap", "reason", why, "result", result(err))
		}
	}
}

// Reaper runs reap every interval until ctx ends.
func (s *Server) Reaper(ctx context.Context, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			s.reap(ctx)
		}
	}
}

func result(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

var errClosedServer = errors.New("the server is shutting down")
