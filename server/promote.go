package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"

	"github.com/agentbox/agentbox/artifact"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/server/api"
	"github.com/agentbox/agentbox/trace"
)

// handlePromote checks the session's outputs against the request's
// artifact rules, as agentbox promote does, and answers the files that
// passed with their provenance record; a refused promotion answers 400
// listing every file and the rule it broke, and nothing. The rules are the
// tenant's (the outputs are its own), but they are untrusted input: a
// json_schema names a file on the server's host and is refused. Validate
// commands run in a fresh session like this one, counted in the tenant's
// quota and closed afterwards.
func (s *Server) handlePromote(w http.ResponseWriter, r *http.Request, t *tenant) error {
	var req api.Promote
	if err := decode(r, &req); err != nil {
		return err
	}
	rules, err := apiRules(req.Rules)
	if err != nil {
		return err
	}
	l, sess, err := s.use(t, r.PathValue("id"))
	if err != nil {
		return err
	}
	base := filepath.Join(s.opts.Data, "tenants", t.name, "tmp")
	if err := os.MkdirAll(base, 0o700); err != nil {
		return fmt.Errorf("promote: %w", err)
	}
	tmp, err := os.MkdirTemp(base, "promote-")
	if err != nil {
		return fmt.Errorf("promote: %w", err)
	}
	defer os.RemoveAll(tmp)
	dest := filepath.Join(tmp, "out")
	opts := artifact.PromoteOptions{RunID: req.RunID, TraceID: l.traceID(), NewSession: s.scratchLike(t, sess)}
	rec, err := artifact.Promote(r.Context(), artifact.NewSessionSource(sess), rules, dest, opts)
	if err != nil {
		var rej *artifact.RejectedError
		if errors.As(err, &rej) {
			ev := trace.Event{Type: trace.Promotion}
			for _, v := range rej.Violations {
				ev.Rejected = append(ev.Rejected, v.String())
			}
			l.emit(ev)
		}
		return s.checked(l, err)
	}
	ev := trace.Event{Type: trace.Promotion, Dest: "the API answer"}
	for _, f := range rec.Files {
		ev.Files = append(ev.Files, trace.PromotedFile{Path: f.Path, SHA256: f.SHA256, Size: f.Size})
	}
	l.emit(ev)
	out := api.Promoted{Files: map[string]api.Blob{}}
	if out.Record, err = json.Marshal(rec); err != nil {
		return err
	}
	for _, f := range rec.Files {
		data, err := os.ReadFile(filepath.Join(dest, filepath.FromSlash(f.Path)))
		if err != nil {
			return fmt.Errorf("promote: read back %s: %w", f.Path, err)
		}
		out.Files[f.Path] = data
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// apiRules parses rules from the API: strict JSON, and no json_schema (a
// path on the server's host, which a tenant may not make it read).
func apiRules(raw json.RawMessage) (*artifact.Rules, error) {
	if len(raw) == 0 {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "promote: no rules: send {\"rules\": {\"outputs\": [{\"glob\": \"out/*.csv\"}]}}")
	}
	var peek struct {
		Outputs []struct {
			JSONSchema string `json:"json_schema"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal(raw, &peek); err != nil {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "promote: rules: %v", err)
	}
	for i, o := range peek.Outputs {
		if o.JSONSchema != "" {
			return nil, sandbox.Errorf(sandbox.ErrInvalid, "promote: rules: outputs[%d].json_schema names a file on the server, which the API does not read; check the schema with a validate command instead", i)
		}
	}
	return artifact.ParseRules(raw, true, "")
}

// scratchLike makes the sessions a promotion's validate commands run in:
// like sess but fresh (no workspace, no snapshot), owned by the server (a
// crash ends them), counted in the tenant's quota until closed.
func (s *Server) scratchLike(t *tenant, sess sandbox.Session) func(context.Context) (sandbox.Session, error) {
	return func(ctx context.Context) (sandbox.Session, error) {
		sp := sess.State().Spec
		sp.Workspace, sp.Snapshot, sp.Detached = "", "", false
		t.mu.Lock()
		err := t.reserveLocked(sp)
		t.mu.Unlock()
		if err != nil {
			return nil, err
		}
		r := sp.Policy.Resources
		release := sync.OnceFunc(func() {
			t.mu.Lock()
			t.pending.add(-r.MemoryBytes, -r.CPUs, -1)
			t.mu.Unlock()
		})
		ns, err := t.client.Create(ctx, sp)
		if err != nil {
			release()
			return nil, err
		}
		return &scratch{Session: ns, release: release}, nil
	}
}

// scratch is a session that gives its quota back when closed.
type scratch struct {
	sandbox.Session
	release func()
}

func (s *scratch) Close(ctx context.Context) error {
	defer s.release()
	return s.Session.Close(ctx)
}
