package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/server/api"
	"github.com/agentbox/agentbox/trace"
)

func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request, t *tenant) error {
	var req api.CreateSession
	if err := decode(r, &req); err != nil {
		return err
	}
	l, err := s.create(r.Context(), t, req)
	if err != nil {
		return err
	}
	auditSession(w, l.rec.State.ID)
	writeJSON(w, http.StatusCreated, l.view(r.Context()))
	return nil
}

func (s *Server) handleList(w http.ResponseWriter, r *http.Request, t *tenant) error {
	out := api.SessionList{Sessions: []api.Session{}}
	for _, l := range t.list() {
		out.Sessions = append(out.Sessions, l.view(r.Context()))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) handleGet(w http.ResponseWriter, r *http.Request, t *tenant) error {
	l, err := t.lookup(r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, l.view(r.Context()))
	return nil
}

func (s *Server) handleDelete(w http.ResponseWriter, r *http.Request, t *tenant) error {
	l, err := t.lookup(r.PathValue("id"))
	if err != nil {
		return err
	}
	if err := s.deleteSession(r.Context(), t, l, "deleted"); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) handleStop(w http.ResponseWriter, r *http.Request, t *tenant) error {
	l, err := t.lookup(r.PathValue("id"))
	if err != nil {
		return err
	}
	if err := s.stop(r.Context(), l); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, l.view(r.Context()))
	return nil
}

func (s *Server) handleRebuild(w http.ResponseWriter, r *http.Request, t *tenant) error {
	l, err := t.lookup(r.PathValue("id"))
	if err != nil {
		return err
	}
	nl, err := s.rebuild(r.Context(), t, l)
	if err != nil {
		return err
	}
	auditSession(w, nl.rec.State.ID)
	writeJSON(w, http.StatusCreated, nl.view(r.Context()))
	return nil
}

// handleExec runs a command to completion. The command is killed when
// the client goes away (the request's context ends).
func (s *Server) handleExec(w http.ResponseWriter, r *http.Request, t *tenant) error {
	var req api.Exec
	if err := decode(r, &req); err != nil {
		return err
	}
	l, sess, err := s.use(t, r.PathValue("id"))
	if err != nil {
		return err
	}
	er := req.Request()
	if req.Stdin != nil {
		er.Stdin = bytes.NewReader(*req.Stdin)
	}
	res, err := sandbox.Exec(r.Context(), sess, er)
	if err != nil {
		l.emit(trace.Event{Type: trace.SandboxExec, Tool: "exec", Cmd: traceCmd(req.Cmd), Err: err.Error()})
		return s.checked(l, err)
	}
	l.emit(execEvent("exec", req.Cmd, res.ExitStatus, res.Duration))
	s.observe(t, res.Duration, len(res.Violations))
	writeJSON(w, http.StatusOK, api.ExecResult{ExitStatus: res.ExitStatus, Stdout: res.Stdout, Stderr: res.Stderr,
		Duration: api.Duration(res.Duration), OutputTruncated: res.OutputTruncated})
	return nil
}

func (s *Server) handleReadFile(w http.ResponseWriter, r *http.Request, t *tenant) error {
	l, sess, err := s.use(t, r.PathValue("id"))
	if err != nil {
		return err
	}
	data, err := sess.ReadFile(r.Context(), r.URL.Query().Get("path"))
	if err != nil {
		return s.checked(l, err)
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	_, _ = w.Write(data)
	return nil
}

// handleWriteFile writes the body to ?path= with ?mode= (octal, default
// 0644).
func (s *Server) handleWriteFile(w http.ResponseWriter, r *http.Request, t *tenant) error {
	q := r.URL.Query()
	mode := uint64(0o644)
	if m := q.Get("mode"); m != "" {
		var err error
		if mode, err = strconv.ParseUint(m, 8, 32); err != nil || mode > 0o777 {
			return sandbox.Errorf(sandbox.ErrInvalid, "mode %q: an octal permission like 0644 (no set-id or sticky bits)", m)
		}
	}
	data, err := readAll(r)
	if err != nil {
		return err
	}
	l, sess, err := s.use(t, r.PathValue("id"))
	if err != nil {
		return err
	}
	if err := sess.WriteFile(r.Context(), q.Get("path"), data, fsMode(mode)); err != nil {
		return s.checked(l, err)
	}
	l.emit(trace.Event{Type: trace.ToolCall, Tool: "write_file", Arguments: q.Get("path"), Bytes: len(data)})
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) handleListDir(w http.ResponseWriter, r *http.Request, t *tenant) error {
	l, sess, err := s.use(t, r.PathValue("id"))
	if err != nil {
		return err
	}
	files, err := sess.ListDir(r.Context(), r.URL.Query().Get("path"))
	if err != nil {
		return s.checked(l, err)
	}
	if files == nil {
		files = []sandbox.FileInfo{}
	}
	writeJSON(w, http.StatusOK, api.FileList{Files: files})
	return nil
}

func (s *Server) handleSnapshot(w http.ResponseWriter, r *http.Request, t *tenant) error {
	l, sess, err := s.use(t, r.PathValue("id"))
	if err != nil {
		return err
	}
	ref, err := s.snapshot(r.Context(), t, l, sess)
	if err != nil {
		return s.checked(l, err)
	}
	writeJSON(w, http.StatusCreated, api.Snapshot{ID: ref})
	return nil
}

func (s *Server) handleSnapshots(w http.ResponseWriter, _ *http.Request, t *tenant) error {
	recs, err := s.reg.Snapshots(t.name)
	if err != nil {
		return err
	}
	out := api.SnapshotList{Snapshots: []api.SnapshotInfo{}}
	for _, rec := range recs {
		out.Snapshots = append(out.Snapshots, api.SnapshotInfo{ID: rec.ID, Session: rec.Session, CreatedAt: rec.CreatedAt})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) handleBackend(w http.ResponseWriter, _ *http.Request, t *tenant) error {
	writeJSON(w, http.StatusOK, api.Backend{Name: t.client.Name(), Enforces: t.client.Enforces()})
	return nil
}

// handleUpdate extends (or shortens) a session's lifetime.
func (s *Server) handleUpdate(w http.ResponseWriter, r *http.Request, t *tenant) error {
	var req api.UpdateSession
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.TTL < 0 || req.IdleTimeout < 0 {
		return sandbox.Errorf(sandbox.ErrInvalid, "ttl and idle_timeout cannot be negative")
	}
	l, err := t.lookup(r.PathValue("id"))
	if err != nil {
		return err
	}
	now := s.opts.Now().UTC()
	l.mu.Lock()
	if req.TTL > 0 {
		l.rec.ExpiresAt = now.Add(t.ttl(time.Duration(req.TTL)))
	}
	if req.IdleTimeout > 0 {
		l.rec.IdleTimeout = t.ttl(time.Duration(req.IdleTimeout))
	}
	rec := l.rec
	sess := l.sess
	l.mu.Unlock()
	l.touch(now)
	// A use of the session to its backend too, whose own idle timeout
	// (Resources.IdleTimeout) may run inside the sandbox; a gone
	// session has no backend session to tell.
	if sess != nil {
		if err := sandbox.Extend(r.Context(), sess); err != nil && !errors.Is(err, sandbox.ErrUnsupported) && !errors.Is(err, sandbox.ErrGone) {
			return err
		}
	}
	if err := s.reg.PutSession(rec); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, l.view(r.Context()))
	return nil
}

// handleImport takes a tar archive (plain, gzip or zstd) as a new snapshot
// of the tenant. The archive is untrusted: the snapshot store refuses
// traversal, links out of the tree, devices and what passes its limits,
// and the tenant's body limit bounds it.
func (s *Server) handleImport(w http.ResponseWriter, r *http.Request, t *tenant) error {
	info, err := t.store.Import(r.Context(), r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return mbe
		}
		return fmt.Errorf("import: the body is a tar archive (plain, gzip or zstd) of the snapshot's files: %w", err)
	}
	if err := s.reg.PutSnapshot(SnapshotRecord{Tenant: t.name, ID: info.ID, CreatedAt: s.opts.Now().UTC()}); err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, api.Snapshot{ID: info.ID})
	return nil
}

// handleExport streams one of the tenant's snapshots as a tar archive.
func (s *Server) handleExport(w http.ResponseWriter, r *http.Request, t *tenant) error {
	id := r.PathValue("sid")
	if !s.reg.HasSnapshot(t.name, id) {
		return sandbox.Errorf(sandbox.ErrNotFound, "snapshot %q not found", id)
	}
	w.Header().Set("Content-Type", "application/x-tar")
	return t.store.Export(r.Context(), id, w)
}

// handlePause freezes every process of the session (see sandbox.Pauser):
// it keeps its memory and files and uses no CPU until unpaused. Commands
// are refused meanwhile (409, kind paused).
func (s *Server) handlePause(w http.ResponseWriter, r *http.Request, t *tenant) error {
	return s.pause(w, r, t, "pause", sandbox.Pause)
}

// handleUnpause lets a paused session's processes continue.
func (s *Server) handleUnpause(w http.ResponseWriter, r *http.Request, t *tenant) error {
	return s.pause(w, r, t, "unpause", sandbox.Unpause)
}

func (s *Server) pause(w http.ResponseWriter, r *http.Request, t *tenant, name string, op func(context.Context, sandbox.Session) error) error {
	l, sess, err := s.use(t, r.PathValue("id"))
	if err != nil {
		return err
	}
	if err := op(r.Context(), sess); err != nil {
		return s.checked(l, err)
	}
	l.emit(trace.Event{Type: trace.ToolCall, Tool: name})
	writeJSON(w, http.StatusOK, l.view(r.Context()))
	return nil
}
