// Package server is agentbox serve: an HTTP API over a sandbox backend,
// shared by tenants who never see each other's sessions, files or
// snapshots. Requests carry a tenant's API key; sessions, their processes
// and snapshots are found only under the asking tenant, so another
// tenant's id answers 404 exactly as an unknown one. The registry of keys,
// sessions and snapshots lives in a bbolt file under the data directory,
// and the sessions the server makes are detached: they outlive the server,
// which finds them again when it restarts.
//
// The handler layer is an http.Handler (Server.Handler) that a program
// mounts where it likes; package server/api holds the wire types.
package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/agentbox/agentbox/mcp"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/pool"
	"github.com/agentbox/agentbox/snapshot"
	"github.com/agentbox/agentbox/trace"
)

// NewBackend makes the backend client of one tenant, whose snapshots go to
// store (each tenant has its own store, so a snapshot id of one is
// meaningless to another).
type NewBackend func(tenant string, store sandbox.SnapshotStore) (sandbox.Client, error)

// Options configure a Server.
type Options struct {
	// Data is the data directory: the registry and each tenant's
	// snapshot store.
	Data string
	// Backend makes each tenant's backend client.
	Backend NewBackend
	// Config holds the tenants' limits.
	Config Config
	// Logger receives the audit log and diagnostics; default slog.Default.
	Logger *slog.Logger
	// Now is the clock (tests move it); default time.Now.
	Now func() time.Time
}

// Server is the sandbox service. Its methods are safe for concurrent use.
type Server struct {
	opts Options
	reg  *Registry
	log  *slog.Logger

	mu      sync.Mutex
	tenants map[string]*tenant
	closed  bool

	// streams counts the clients attached to streamed processes.
	streams sync.WaitGroup

	metrics *metrics
}

// tenant is one tenant's backend, snapshot store and live sessions.
type tenant struct {
	name   string
	limits Limits
	client sandbox.Client
	store  *snapshot.Store

	// rate limits its requests when its limits set one.
	rate *bucket

	mu       sync.Mutex
	sessions map[string]*live
	pending  usage

	// pool, when its limits ask for one, keeps sessions ready; client is
	// then the pool over the backend.
	pool *pool.Pool

	// mcp is its MCP server and mcpHTTP its handler, made on first use
	// (see mcp.go).
	mcp     *mcp.Server
	mcpHTTP http.Handler
}

// New opens the registry in opts.Data and finds again every session it
// lists: a live one is resumed, one whose sandbox died is kept as gone
// (its workspace or snapshot left for a rebuild).
func New(ctx context.Context, opts Options) (*Server, error) {
	if opts.Data == "" {
		return nil, errors.New("server: no data directory")
	}
	if opts.Backend == nil {
		return nil, errors.New("server: no backend")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if err := opts.Config.validate(); err != nil {
		return nil, err
	}
	reg, err := OpenRegistry(opts.Data)
	if err != nil {
		return nil, err
	}
	s := &Server{opts: opts, reg: reg, log: opts.Logger, tenants: map[string]*tenant{}}
	s.metrics = newMetrics(s)
	if err := s.recover(ctx); err != nil {
		reg.Close()
		return nil, err
	}
	return s, nil
}

// PoolStats reports tenant's warm pool (nil when it has none, or has not
// been used since the server started).
func (s *Server) PoolStats(tenant string) []pool.Stat {
	s.mu.Lock()
	t := s.tenants[tenant]
	s.mu.Unlock()
	if t == nil || t.pool == nil {
		return nil
	}
	return t.pool.Stats()
}

// Registry is the server's registry (for the token commands of a running
// server's admin socket).
func (s *Server) Registry() *Registry { return s.reg }

// recover resumes the sessions the registry lists.
func (s *Server) recover(ctx context.Context) error {
	recs, err := s.reg.Sessions()
	if err != nil {
		return err
	}
	for _, rec := range recs {
		t, err := s.tenant(rec.Tenant)
		if err != nil {
			return err
		}
		l := &live{rec: rec}
		l.touch(s.opts.Now())
		if !rec.Gone {
			st := rec.State
			st.Spec.Policy.Network.Secrets = t.secretsFor(st.Spec.Policy.Network)
			sess, err := t.client.Resume(ctx, st)
			switch {
			case err == nil:
				l.sess = sess
			case errors.Is(err, sandbox.ErrGone):
				s.log.Warn("session gone while the server was away; kept for a rebuild", "tenant", rec.Tenant, "session", rec.State.ID, "err", err)
				l.rec.Gone = true
				if err := s.reg.PutSession(l.rec); err != nil {
					return err
				}
			default:
				return fmt.Errorf("server: resume session %s of tenant %s: %w", rec.State.ID, rec.Tenant, err)
			}
		}
		s.openTrace(l)
		if l.rec.Gone {
			l.emit(trace.Event{Type: trace.RunStart, Agent: "serve", Session: rec.State.ID, Input: "found gone by a restarted server"})
		} else {
			l.emit(trace.Event{Type: trace.RunStart, Agent: "serve", Session: rec.State.ID, Input: "resumed by a restarted server"})
		}
		t.sessions[rec.State.ID] = l
	}
	s.log.Info("registry loaded", "sessions", len(recs))
	return s.reapPooled(ctx)
}

// reapPooled ends the sessions a warm pool held when its server was
// killed: no tenant ever saw them. One that cannot be deleted now keeps
// its row, for the next start to try again.
func (s *Server) reapPooled(ctx context.Context) error {
	recs, err := s.reg.Pooled()
	if err != nil {
		return err
	}
	for _, rec := range recs {
		t, err := s.tenant(rec.Tenant)
		if err != nil {
			return err
		}
		c := t.client
		if t.pool != nil {
			c = t.pool.Client
		}
		if err := c.Delete(ctx, rec.State); err != nil {
			s.log.Warn("a pooled session an earlier server left could not be deleted; the next start tries again", "tenant", rec.Tenant, "session", rec.State.ID, "err", err)
			continue
		}
		if err := s.reg.DeletePooled(rec.Tenant, rec.State.ID); err != nil {
			return err
		}
		s.log.Info("deleted a pooled session an earlier server left", "tenant", rec.Tenant, "session", rec.State.ID)
	}
	return nil
}

// tenant returns the tenant named name, opening its backend and snapshot
// store on first use.
func (s *Server) tenant(name string) (*tenant, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.tenants[name]; ok {
		return t, nil
	}
	if err := validTenant(name); err != nil {
		return nil, err
	}
	store, err := snapshot.Open(filepath.Join(s.opts.Data, "tenants", name, "snapshots"), snapshot.Options{Logger: s.log})
	if err != nil {
		return nil, fmt.Errorf("server: tenant %s: %w", name, err)
	}
	c, err := s.opts.Backend(name, store)
	if err != nil {
		return nil, fmt.Errorf("server: tenant %s: backend: %w", name, err)
	}
	t := &tenant{name: name, limits: s.opts.Config.limits(name), client: c, store: store, sessions: map[string]*live{}}
	if t.limits.Rate > 0 {
		t.rate = &bucket{rate: t.limits.Rate}
	}
	if n := t.limits.Pool; n > 0 {
		// The template is what a create with an empty spec becomes once
		// admitted, so that such a create matches it field for field.
		var sp sandbox.Spec
		if err := t.admit(&sp); err != nil {
			return nil, fmt.Errorf("server: tenant %s: pool: %w", name, err)
		}
		// Pooled sessions are detached: the registry lists them until
		// they are handed out (PutSession) or closed, so that the next
		// server ends those a killed one left (reapPooled).
		opts := pool.Options{
			Logger: s.log.With("tenant", name),
			Made: func(sess sandbox.Session) error {
				return s.reg.PutPooled(PooledRecord{Tenant: name, State: sess.State()})
			},
			Closed: func(sess sandbox.Session) {
				if err := s.reg.DeletePooled(name, sess.ID()); err != nil {
					s.log.Warn("pool: a closed session stays in the registry; the next server ends it again", "tenant", name, "session", sess.ID(), "err", err)
				}
			},
		}
		p, err := pool.New(c, opts, pool.Template{Name: name + " default", Spec: sp, Size: n})
		if err != nil {
			return nil, fmt.Errorf("server: tenant %s: %w", name, err)
		}
		t.pool, t.client = p, p
	}
	s.tenants[name] = t
	return t, nil
}

// Close stops the server's own work; with closeSessions it also closes
// every live session (agentbox serve --close-on-exit), else they keep
// running for the next server. It closes the registry.
func (s *Server) Close(ctx context.Context, closeSessions bool) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	tenants := make([]*tenant, 0, len(s.tenants))
	for _, t := range s.tenants {
		tenants = append(tenants, t)
	}
	s.mu.Unlock()
	var errs []error
	for _, t := range tenants {
		// An MCP client's sessions are its own: they end with the
		// connection, which ends here.
		t.mu.Lock()
		m := t.mcp
		t.mu.Unlock()
		if m != nil {
			m.Close(ctx)
		}
		for _, l := range t.list() {
			if closeSessions {
				if err := s.deleteSession(ctx, t, l, "deleted: the server closed with --close-on-exit"); err != nil {
					errs = append(errs, err)
				}
				continue
			}
			l.detachAll()
			l.closeTrace()
		}
	}
	for _, t := range tenants {
		c := t.client
		if t.pool != nil {
			errs = append(errs, t.pool.Close(ctx))
			c = t.pool.Client
		}
		if c, ok := c.(io.Closer); ok {
			errs = append(errs, c.Close())
		}
	}
	errs = append(errs, s.reg.Close())
	return errors.Join(errs...)
}
