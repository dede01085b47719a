package mcp

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentbox/agentbox/agent"
	"github.com/agentbox/agentbox/manifest"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/trace"
)

// owner is one connected client and the sessions it made, in the order
// it made them.
type owner struct {
	client string

	mu    sync.Mutex
	boxes map[string]*box
	order []string
	// snapshots are those this client saved, the only ones it restores.
	snapshots []string
}

// box is one session and the harness tools bound to it.
type box struct {
	id      string
	sess    sandbox.Session
	created time.Time
	shell   *agent.Shell
	tools   map[string]agent.Tool
	mounts  []string
	// workspace is the directory a manifest was written into, removed
	// when the sandbox is closed ("" for a backend-made workspace).
	workspace string

	traceMu   sync.Mutex
	trace     *trace.Writer
	tracePath string
}

func (o *owner) add(b *box) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.boxes[b.id] = b
	o.order = append(o.order, b.id)
}

// get is the session id names, or with id empty the latest one (nil when
// there is none).
func (o *owner) get(id string) (*box, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if id == "" {
		if len(o.order) == 0 {
			return nil, nil
		}
		return o.boxes[o.order[len(o.order)-1]], nil
	}
	b, ok := o.boxes[id]
	if !ok {
		return nil, sandbox.Errorf(sandbox.ErrNotFound, "no sandbox %q among yours (%s); sandbox_list shows them, sandbox_create makes one", id, o.idsLocked())
	}
	return b, nil
}

func (o *owner) take(id string) (*box, error) {
	b, err := o.get(id)
	if err != nil || b == nil {
		return b, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.boxes, b.id)
	o.order = slices.DeleteFunc(o.order, func(s string) bool { return s == b.id })
	return b, nil
}

func (o *owner) takeAll() []*box {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]*box, 0, len(o.order))
	for _, id := range o.order {
		out = append(out, o.boxes[id])
	}
	o.boxes, o.order = map[string]*box{}, nil
	return out
}

func (o *owner) list() []*box {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]*box, 0, len(o.order))
	for _, id := range o.order {
		out = append(out, o.boxes[id])
	}
	return out
}

func (o *owner) idsLocked() string {
	if len(o.order) == 0 {
		return "you have none"
	}
	return strings.Join(o.order, ", ")
}

// createRequest is what a client may ask of a new session: less than the
// operator's ceiling.
type createRequest struct {
	Policy sandbox.Policy
	// Mounts names the operator's mounts to include (by target base
	// name); nil: all of them.
	Mounts []string
	// Snapshot seeds the workspace.
	Snapshot string
	// Preset names the operator's preset to start from; empty: "default"
	// when the operator defined one, else the ceiling.
	Preset string
	// Manifest, when set, is what the workspace starts with. It comes
	// from the model, so it is untrusted: no grants and no host sources
	// at all (the operator's mounts are how host files come in).
	Manifest *manifest.Manifest
}

// create makes a session for o under the ceiling.
func (s *Server) create(ctx context.Context, o *owner, req createRequest) (*box, error) {
	base, err := s.preset(req.Preset)
	if err != nil {
		return nil, err
	}
	pol, err := sandbox.Bound(base, req.Policy)
	if err != nil {
		return nil, err
	}
	mounts, err := s.pickMounts(req.Mounts)
	if err != nil {
		return nil, err
	}
	spec := sandbox.Spec{
		Policy:      pol,
		Mounts:      mounts,
		Snapshot:    req.Snapshot,
		AllowWeaker: s.opts.AllowWeaker,
		Detached:    s.opts.Keep,
		Labels:      map[string]string{"agentbox.mcp": "true"},
	}
	if o.client != "" {
		spec.Labels["agentbox.mcp.client"] = o.client
	}
	var ws string
	if req.Manifest != nil {
		if ws, err = materialize(ctx, req.Manifest, &spec); err != nil {
			return nil, err
		}
	}
	sess, err := s.opts.Client.Create(ctx, spec)
	if err != nil {
		if ws != "" {
			os.RemoveAll(ws)
		}
		return nil, err
	}
	b := &box{id: sess.ID(), sess: sess, created: time.Now(), shell: &agent.Shell{}, tools: map[string]agent.Tool{}, workspace: ws}
	for _, m := range mounts {
		b.mounts = append(b.mounts, m.Target)
	}
	for _, c := range []agent.Capability{b.shell, &agent.Filesystem{}} {
		for _, t := range c.Tools(sess) {
			b.tools[t.Spec.Name] = t
		}
	}
	if s.opts.Keep && s.opts.OnKeep != nil {
		if err := s.opts.OnKeep(sess.State(), ws); err != nil {
			_ = sess.Close(context.WithoutCancel(ctx))
			if ws != "" {
				os.RemoveAll(ws)
			}
			return nil, fmt.Errorf("register the kept session: %w", err)
		}
	}
	if err := s.openTrace(b, o); err != nil {
		s.log.Warn("session trace", "session", b.id, "err", err)
	}
	o.add(b)
	s.log.Info("session created", "session", b.id, "client", o.client)
	return b, nil
}

// materialize writes an untrusted manifest into a new temporary
// directory and points spec at it. Validate refuses grants and every host
// source (there is no base) before anything is written.
func materialize(ctx context.Context, m *manifest.Manifest, spec *sandbox.Spec) (string, error) {
	if spec.Snapshot != "" {
		return "", sandbox.Errorf(sandbox.ErrInvalid, "manifest: a sandbox starts from a manifest or from a snapshot, not both")
	}
	if err := m.Validate(manifest.ValidateOptions{}); err != nil {
		return "", err
	}
	ws, err := os.MkdirTemp("", "agentbox-mcp-ws-")
	if err != nil {
		return "", err
	}
	// Entered by the sandbox's ids, which the backend maps to the
	// workspace's owner.
	err = os.Chmod(ws, 0o755)
	var uid, gid int
	if err == nil {
		uid, gid, err = manifest.OwnerOf(ws)
	}
	var mat *manifest.Materialized
	if err == nil {
		mat, err = m.Materialize(ctx, ws, manifest.MaterializeOptions{UID: uid, GID: gid})
	}
	if err != nil {
		os.RemoveAll(ws)
		return "", err
	}
	spec.Workspace, spec.Workdir = ws, m.EffectiveRoot()
	spec.Mounts = append(mat.Mounts, spec.Mounts...)
	spec.Env = mat.Env
	spec.User = mat.User
	return ws, nil
}

// preset is the ceiling of a session made from the named preset: the
// preset within the operator's ceiling.
func (s *Server) preset(name string) (sandbox.Policy, error) {
	if name == "" {
		if _, ok := s.opts.Presets["default"]; !ok {
			return s.opts.Ceiling, nil
		}
		name = "default"
	}
	p, ok := s.opts.Presets[name]
	if !ok {
		return sandbox.Policy{}, sandbox.Errorf(sandbox.ErrInvalid, "no preset %q (the operator defines: %s)", name, s.presetNames())
	}
	return sandbox.Bound(s.opts.Ceiling, p)
}

func (s *Server) presetNames() string {
	if len(s.opts.Presets) == 0 {
		return "none"
	}
	return strings.Join(slices.Sorted(maps.Keys(s.opts.Presets)), ", ")
}

// pickMounts are the operator's mounts the client named.
func (s *Server) pickMounts(names []string) ([]sandbox.Mount, error) {
	if names == nil {
		return slices.Clone(s.opts.Mounts), nil
	}
	var out []sandbox.Mount
	for _, n := range names {
		i := slices.IndexFunc(s.opts.Mounts, func(m sandbox.Mount) bool { return filepath.Base(m.Target) == n || m.Target == n })
		if i < 0 {
			return nil, sandbox.Errorf(sandbox.ErrInvalid, "mount %q is not one the operator offers (%s)", n, s.mountNames())
		}
		out = append(out, s.opts.Mounts[i])
	}
	return out, nil
}

func (s *Server) mountNames() string {
	if len(s.opts.Mounts) == 0 {
		return "it offers none"
	}
	var names []string
	for _, m := range s.opts.Mounts {
		names = append(names, filepath.Base(m.Target))
	}
	return strings.Join(names, ", ")
}

// closeBox kills the session's running commands and closes it.
func (s *Server) closeBox(ctx context.Context, b *box, why string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err := errors.Join(b.shell.CloseSession(ctx, b.sess), b.sess.Close(ctx))
	if b.workspace != "" && err == nil {
		err = os.RemoveAll(b.workspace)
	}
	b.endTrace(why)
	s.log.Info("session closed", "session", b.id, "why", why)
	return err
}

// openTrace starts the session's JSONL trace in TraceDir.
func (s *Server) openTrace(b *box, o *owner) error {
	if s.opts.TraceDir == "" {
		return nil
	}
	if err := os.MkdirAll(s.opts.TraceDir, 0o700); err != nil {
		return fmt.Errorf("create trace directory: %w", err)
	}
	p := filepath.Join(s.opts.TraceDir, b.created.UTC().Format("20060102T150405.000")+"-mcp-"+b.id+".jsonl")
	tw, err := trace.Create(p)
	if err != nil {
		return err
	}
	b.trace, b.tracePath = tw, p
	client := o.client
	if client == "" {
		client = "unnamed client"
	}
	_ = tw.Emit(trace.Event{Type: trace.RunStart, Agent: "mcp", Model: client, Session: b.id})
	return nil
}

func (b *box) emit(e trace.Event) {
	b.traceMu.Lock()
	defer b.traceMu.Unlock()
	if b.trace != nil {
		_ = b.trace.Emit(e)
	}
}

// endTrace writes the trace's last event and closes it.
func (b *box) endTrace(why string) {
	b.traceMu.Lock()
	defer b.traceMu.Unlock()
	if b.trace == nil {
		return
	}
	_ = b.trace.Emit(trace.Event{Type: trace.RunEnd, Output: why, DurationMS: time.Since(b.created).Milliseconds()})
	_ = b.trace.Close()
	b.trace = nil
}
