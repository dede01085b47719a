package server

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/server/api"
	"github.com/agentbox/agentbox/trace"
)

// Each session's steps (its creation, every command with its exit, file
// writes and removals, snapshots, promotions, its end) are recorded as a
// JSONL trace (package trace: redacted, bounded, flushed per event) in
// DATA/tenants/NAME/traces/ID.jsonl. The file outlives the session, so a
// tenant reads the trace of a session it deleted; it lives under the
// tenant's directory, so another tenant's id is not found, as an unknown
// one. A server that restarts appends to the trace of each session it
// finds again, as a new run of the same file.

// traceDir is the directory of tenant's traces.
func (s *Server) traceDir(tenant string) string {
	return filepath.Join(s.opts.Data, "tenants", tenant, "traces")
}

// openTrace starts (or continues) l's trace; a trace that cannot be
// opened is logged and the session runs untraced rather than failing.
func (s *Server) openTrace(l *live) {
	dir := s.traceDir(l.rec.Tenant)
	f, err := func() (*os.File, error) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		return os.OpenFile(filepath.Join(dir, l.rec.State.ID+".jsonl"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	}()
	if err != nil {
		s.log.Warn("session trace unavailable", "tenant", l.rec.Tenant, "session", l.rec.State.ID, "err", err)
		return
	}
	l.tmu.Lock()
	l.tf, l.tw = f, trace.New(f)
	l.tmu.Unlock()
}

// emit records e in l's trace.
func (l *live) emit(e trace.Event) {
	l.tmu.Lock()
	defer l.tmu.Unlock()
	if l.tw != nil {
		_ = l.tw.Emit(e)
	}
}

// traceID is the id of l's trace (for a provenance record).
func (l *live) traceID() string {
	l.tmu.Lock()
	defer l.tmu.Unlock()
	if l.tw == nil {
		return ""
	}
	return l.tw.TraceID()
}

// endTrace records the session's end and closes its trace.
func (l *live) endTrace(why string) {
	l.tmu.Lock()
	defer l.tmu.Unlock()
	if l.tw == nil {
		return
	}
	_ = l.tw.Emit(trace.Event{Type: trace.RunEnd, Output: why, DurationMS: time.Since(l.rec.CreatedAt).Milliseconds()})
	_ = l.tw.Close()
	_ = l.tf.Close()
	l.tw, l.tf = nil, nil
}

// closeTrace closes l's trace file without ending it (the server stops;
// the session runs on, and the next server appends).
func (l *live) closeTrace() {
	l.tmu.Lock()
	defer l.tmu.Unlock()
	if l.tw != nil {
		_ = l.tw.Close()
		_ = l.tf.Close()
		l.tw, l.tf = nil, nil
	}
}

// traceCmd is a command as its trace shows it.
func traceCmd(cmd []string) string {
	s := strings.Join(cmd, " ")
	if len(s) > 2000 {
		s = s[:2000] + "…"
	}
	return s
}

// execEvent is the trace event of a finished command.
func execEvent(tool string, cmd []string, st sandbox.ExitStatus, d time.Duration) trace.Event {
	code := st.ExitCode
	return trace.Event{Type: trace.SandboxExec, Tool: tool, Cmd: traceCmd(cmd), ExitCode: &code, TimedOut: st.TimedOut,
		Violations: st.Violations, DurationMS: d.Milliseconds()}
}

// validID is a session id as the traces' file names may hold: no
// separator, no leading dot.
var validID = regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$`)

// handleTrace answers the trace of one of the tenant's sessions, live or
// deleted, as JSONL.
func (s *Server) handleTrace(w http.ResponseWriter, r *http.Request, t *tenant) error {
	id := r.PathValue("id")
	notFound := sandbox.Errorf(sandbox.ErrNotFound, "trace of session %q not found", id)
	if !validID.MatchString(id) {
		return notFound
	}
	f, err := os.Open(filepath.Join(s.traceDir(t.name), id+".jsonl"))
	if err != nil {
		if os.IsNotExist(err) {
			return notFound
		}
		return fmt.Errorf("trace %s: %w", id, err)
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/x-ndjson")
	http.ServeContent(w, r, "", time.Time{}, f)
	return nil
}

// handleTraces lists the sessions the tenant has traces of.
func (s *Server) handleTraces(w http.ResponseWriter, _ *http.Request, t *tenant) error {
	ents, err := os.ReadDir(s.traceDir(t.name))
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("traces: %w", err)
	}
	out := api.TraceList{Traces: []api.TraceInfo{}}
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".jsonl")
		if !ok || !validID.MatchString(id) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		out.Traces = append(out.Traces, api.TraceInfo{Session: id, Size: info.Size(), ModTime: info.ModTime().UTC()})
	}
	sort.Slice(out.Traces, func(i, j int) bool { return out.Traces[i].ModTime.Before(out.Traces[j].ModTime) })
	writeJSON(w, http.StatusOK, out)
	return nil
}
