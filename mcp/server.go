// Package mcp is agentbox as the sandbox of any MCP-capable agent: a Model
// Context Protocol server (on the official Go SDK) whose tools create
// sandbox sessions, run commands and edit files in them, over any
// sandbox.Client (the native backend, docker, a remote server).
//
// The operator decides, the model does not: Options.Ceiling bounds every
// session (sandbox.Bound), and a tool call may ask for less, never more.
// Each connected client owns the sessions it made; they are closed when it
// disconnects, unless Options.Keep leaves them detached. The tools are the
// agent harness's (agent.Shell, agent.Filesystem), so output is bounded
// with the same truncation marker and patches are the same V4A.
package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox/agentbox/agent"
	"github.com/agentbox/agentbox/sandbox"
)

// Options configure a Server.
type Options struct {
	// Client makes the sessions.
	Client sandbox.Client
	// Ceiling is the operator's policy: every session's policy is bounded
	// by it, and a session that asks for nothing gets it.
	Ceiling sandbox.Policy
	// Mounts are host directories the operator offers, read-only; a
	// session gets those it names (all of them when it names none).
	Mounts []sandbox.Mount
	// AllowWeaker lets sessions start where the backend cannot enforce
	// parts of the policy (each is logged).
	AllowWeaker bool
	// Keep leaves a client's sessions running, detached, when it
	// disconnects; OnKeep is told each one (to register it where
	// `agentbox session ls` finds it) with the directory its manifest
	// was written into, "" if none, which whoever ends the session then
	// removes.
	Keep   bool
	OnKeep func(st sandbox.State, workspace string) error
	// Approvals are the operator's rules: a matching call runs only when
	// the client's user approves it (MCP elicitation).
	Approvals []agent.ApprovalRule
	// Presets are the operator's named policies, each within Ceiling; a
	// client names one in sandbox_create, and "default", when defined,
	// applies when it names none.
	Presets map[string]sandbox.Policy
	// Promotion, when set, offers the promote tool.
	Promotion *Promotion
	// TraceDir receives one JSONL trace per session; empty: no trace.
	TraceDir string
	// Logger reports what the server does (stderr for stdio); nil
	// discards it.
	Logger *slog.Logger
	// Version is reported to clients.
	Version string
}

// Server is the MCP server. One Server serves many clients (one over
// stdio, any number over HTTP); each owns its sessions.
type Server struct {
	opts Options
	sdk  *sdk.Server
	log  *slog.Logger

	mu     sync.Mutex
	owners map[*sdk.ServerSession]*owner
	closed bool
	wg     sync.WaitGroup
}

// New checks opts and builds the server with its tools.
func New(opts Options) (*Server, error) {
	if opts.Client == nil {
		return nil, errors.New("mcp: no sandbox client")
	}
	if err := opts.Ceiling.Validate(); err != nil {
		return nil, fmt.Errorf("mcp: the operator's policy: %w", err)
	}
	for _, m := range opts.Mounts {
		if !m.ReadOnly {
			return nil, fmt.Errorf("mcp: mount %s is not read-only: the MCP server offers host directories read-only only", m.Source)
		}
	}
	for name, p := range opts.Presets {
		if _, err := sandbox.Bound(opts.Ceiling, p); err != nil {
			return nil, fmt.Errorf("mcp: preset %q is above the ceiling: %w", name, err)
		}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	s := &Server{opts: opts, log: log, owners: map[*sdk.ServerSession]*owner{}}
	s.sdk = sdk.NewServer(&sdk.Implementation{Name: "agentbox", Title: "agentbox sandbox", Version: opts.Version},
		&sdk.ServerOptions{Instructions: instructions, Logger: log})
	s.addTools()
	return s, nil
}

// instructions tell the model how the tools fit together.
const instructions = `agentbox runs commands and edits files in confined sandboxes (no host files, no network unless the operator allows it, bounded memory, processes and time).
Call exec to run a shell command: without session_id it uses your latest sandbox, or creates one. sandbox_create makes another (ask for less network, memory or time than the operator's ceiling if you like; never more). Paths are relative to /workspace. Edit files with apply_patch (V4A), write_file, read_file, list_dir. Output longer than the cap keeps its head and tail around a "…[truncated N bytes]…" marker. Close sandboxes you no longer need with sandbox_close.`

// Run serves one client over t (stdio: sdk.StdioTransport) until it
// disconnects or ctx ends, then closes (or keeps) its sessions.
func (s *Server) Run(ctx context.Context, t sdk.Transport) error {
	err := s.sdk.Run(ctx, t)
	s.Close(context.WithoutCancel(ctx))
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return nil
	}
	return err
}

// Close ends every client's sessions (or leaves them, with Keep) and
// waits for what disconnections started.
func (s *Server) Close(ctx context.Context) {
	s.mu.Lock()
	s.closed = true
	owners := make([]*owner, 0, len(s.owners))
	conns := make([]*sdk.ServerSession, 0, len(s.owners))
	for ss, o := range s.owners {
		owners = append(owners, o)
		conns = append(conns, ss)
		delete(s.owners, ss)
	}
	s.mu.Unlock()
	for _, o := range owners {
		s.release(ctx, o)
	}
	for _, ss := range conns {
		_ = ss.Close() // ends its watcher
	}
	s.wg.Wait()
}

// ownerOf is the client state of ss, made on its first call; a watcher
// releases it when the client disconnects.
func (s *Server) ownerOf(ss *sdk.ServerSession) (*owner, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, sandbox.Errorf(sandbox.ErrClosed, "the server is shutting down")
	}
	if o, ok := s.owners[ss]; ok {
		return o, nil
	}
	o := &owner{boxes: map[string]*box{}}
	if p := ss.InitializeParams(); p != nil && p.ClientInfo != nil {
		o.client = p.ClientInfo.Name
	}
	s.owners[ss] = o
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_ = ss.Wait()
		s.mu.Lock()
		_, mine := s.owners[ss]
		delete(s.owners, ss)
		s.mu.Unlock()
		if mine {
			s.release(context.Background(), o)
		}
	}()
	return o, nil
}

// release ends what a disconnected client owned: its sessions are
// closed, or, with Keep, left running and handed to OnKeep.
func (s *Server) release(ctx context.Context, o *owner) {
	for _, b := range o.takeAll() {
		if s.opts.Keep {
			b.endTrace("client disconnected; session kept")
			s.log.Info("client disconnected; session kept", "session", b.id)
			continue
		}
		if err := s.closeBox(ctx, b, "client disconnected"); err != nil {
			s.log.Warn("close session", "session", b.id, "err", err)
		}
	}
}
