package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"path/filepath"
	"time"

	"github.com/agentbox/agentbox/mcp"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/server/api"
)

// Each tenant has an MCP server (package mcp, streamable HTTP) at /v1/mcp,
// behind the same bearer key check as the rest of the API. Its sandbox
// client is the tenant itself (tenantClient): a session an MCP client
// makes is admitted, counted in the tenant's quota, registered and traced
// exactly as one made with POST /v1/sessions, and so is invisible to other
// tenants. When the MCP client leaves, its sessions are deleted.

// mcpIdle ends an MCP client's connection (and its sessions) after this
// long without a request.
const mcpIdle = 30 * time.Minute

// handleMCP serves the tenant's MCP endpoint.
func (s *Server) handleMCP(w http.ResponseWriter, r *http.Request, t *tenant) error {
	h, err := s.mcpHandler(t)
	if err != nil {
		return err
	}
	h.ServeHTTP(w, r)
	return nil
}

// mcpHandler is t's MCP server, made on first use.
func (s *Server) mcpHandler(t *tenant) (http.Handler, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mcpHTTP != nil {
		return t.mcpHTTP, nil
	}
	srv, err := mcp.New(mcp.Options{
		Client:  &tenantClient{s: s, t: t},
		Ceiling: mcpCeiling(t.limits),
		// The server's own trace of each session records its commands
		// and files; this one records the MCP calls.
		TraceDir: filepath.Join(s.opts.Data, "tenants", t.name, "mcp-traces"),
		Logger:   s.log.With("tenant", t.name, "front", "mcp"),
	})
	if err != nil {
		return nil, fmt.Errorf("mcp for tenant %s: %w", t.name, err)
	}
	t.mcp, t.mcpHTTP = srv, srv.Streamable(mcpIdle)
	return t.mcpHTTP, nil
}

// mcpCeiling is the policy an MCP client's sessions get unless they ask
// for less: the tenant's network allow-list and per-session defaults (the
// tenant's ceiling is enforced again at admission).
func mcpCeiling(lim Limits) sandbox.Policy {
	var p sandbox.Policy
	if len(lim.Network) > 0 {
		p.Network = sandbox.NetworkPolicy{Mode: sandbox.NetworkAllowList, Allow: lim.Network}
	}
	p.Resources.MemoryBytes = int64(lim.SessionMemory)
	p.Resources.CPUs = lim.SessionCPUs
	p.Resources.DiskBytes = int64(lim.Disk)
	p.Resources.ExecTimeout = lim.ExecTimeout
	return p
}

// tenantClient is a sandbox.Client whose sessions are tenant t's on this
// server, made and deleted through the same path as the API's.
type tenantClient struct {
	s *Server
	t *tenant
}

var _ sandbox.Client = (*tenantClient)(nil)

func (c *tenantClient) Name() string             { return c.t.client.Name() }
func (c *tenantClient) Enforces() []sandbox.Part { return c.t.client.Enforces() }
func (c *tenantClient) wrap(l *live) (*tenantSession, error) {
	sess, err := l.running()
	if err != nil {
		return nil, err
	}
	return &tenantSession{Session: sess, c: c, l: l}, nil
}

func (c *tenantClient) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Session, error) {
	l, err := c.s.create(ctx, c.t, api.CreateSession{Spec: spec})
	if err != nil {
		return nil, err
	}
	return c.wrap(l)
}

func (c *tenantClient) Resume(_ context.Context, st sandbox.State) (sandbox.Session, error) {
	l, err := c.t.lookup(st.ID)
	if err != nil {
		return nil, sandbox.Wrap("resume "+st.ID, sandbox.ErrGone, err)
	}
	return c.wrap(l)
}

func (c *tenantClient) Rebuild(ctx context.Context, st sandbox.State) (sandbox.Session, error) {
	l, err := c.t.lookup(st.ID)
	if err != nil {
		return nil, err
	}
	nl, err := c.s.rebuild(ctx, c.t, l)
	if err != nil {
		return nil, err
	}
	return c.wrap(nl)
}

func (c *tenantClient) Delete(ctx context.Context, st sandbox.State) error {
	l, err := c.t.lookup(st.ID)
	if errors.Is(err, sandbox.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return c.s.deleteSession(ctx, c.t, l, "deleted by its MCP client")
}

// tenantSession is a session of the tenant used by its MCP server: every
// use counts as activity (the idle reaper spares it), a snapshot is
// indexed for the tenant, and Close deletes it as DELETE would.
type tenantSession struct {
	sandbox.Session
	c *tenantClient
	l *live
}

func (ts *tenantSession) touch() { ts.l.touch(ts.c.s.opts.Now()) }

func (ts *tenantSession) Start(ctx context.Context, req sandbox.ExecRequest) (sandbox.Process, error) {
	ts.touch()
	p, err := ts.Session.Start(ctx, req)
	return p, ts.c.s.checked(ts.l, err)
}

func (ts *tenantSession) ReadFile(ctx context.Context, p string) ([]byte, error) {
	ts.touch()
	return ts.Session.ReadFile(ctx, p)
}

// ReadFileLimit keeps the session's bounded read (sandbox.LimitedReader)
// through the wrapper.
func (ts *tenantSession) ReadFileLimit(ctx context.Context, p string, max int64) ([]byte, error) {
	ts.touch()
	return sandbox.ReadFileLimit(ctx, ts.Session, p, max)
}

func (ts *tenantSession) WriteFile(ctx context.Context, p string, data []byte, mode fs.FileMode) error {
	ts.touch()
	return ts.Session.WriteFile(ctx, p, data, mode)
}

func (ts *tenantSession) ListDir(ctx context.Context, p string) ([]sandbox.FileInfo, error) {
	ts.touch()
	return ts.Session.ListDir(ctx, p)
}

func (ts *tenantSession) Snapshot(ctx context.Context) (string, error) {
	ts.touch()
	return ts.c.s.snapshot(ctx, ts.c.t, ts.l, ts.Session)
}

func (ts *tenantSession) Stop(ctx context.Context) error { return ts.c.s.stop(ctx, ts.l) }

func (ts *tenantSession) Close(ctx context.Context) error {
	return ts.c.Delete(ctx, ts.Session.State())
}
