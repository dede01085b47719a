package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/server/api"
)

// handlerFunc is a route's handler: it runs for an authenticated tenant
// and returns an error that becomes the answer (see writeError).
type handlerFunc func(w http.ResponseWriter, r *http.Request, t *tenant) error

// Handler is the server's HTTP API, to serve or to mount under a larger
// mux (it owns /v1/, /healthz and /readyz).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	s.routes(mux)
	return mux
}

// mux is where routes are registered (an http.ServeMux, or a test's
// recorder).
type mux interface {
	Handle(pattern string, h http.Handler)
	HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request))
}

func (s *Server) routes(mux mux) {
	route := func(pattern string, h handlerFunc) { mux.Handle(pattern, s.authed(pattern, h)) }
	route("POST /v1/sessions", s.handleCreate)
	route("GET /v1/sessions", s.handleList)
	route("GET /v1/sessions/{id}", s.handleGet)
	route("DELETE /v1/sessions/{id}", s.handleDelete)
	route("PATCH /v1/sessions/{id}", s.handleUpdate)
	route("POST /v1/sessions/{id}/stop", s.handleStop)
	route("POST /v1/sessions/{id}/rebuild", s.handleRebuild)
	route("POST /v1/sessions/{id}/pause", s.handlePause)
	route("POST /v1/sessions/{id}/unpause", s.handleUnpause)
	route("POST /v1/sessions/{id}/exec", s.handleExec)
	route("GET /v1/sessions/{id}/processes", s.handleStart)
	route("GET /v1/sessions/{id}/processes/{pid}", s.handleAttach)
	route("GET /v1/sessions/{id}/files", s.handleReadFile)
	route("PUT /v1/sessions/{id}/files", s.handleWriteFile)
	route("DELETE /v1/sessions/{id}/files", s.handleRemove)
	route("GET /v1/sessions/{id}/stat", s.handleStat)
	route("GET /v1/sessions/{id}/dir", s.handleListDir)
	route("GET /v1/sessions/{id}/archive", s.handleGetArchive)
	route("PUT /v1/sessions/{id}/archive", s.handlePutArchive)
	route("GET /v1/sessions/{id}/ports/{port}", s.handlePort)
	for _, m := range proxiedMethods {
		route(m+" /v1/sessions/{id}/ports/{port}/http/{path...}", s.handlePortHTTP)
	}
	route("POST /v1/sessions/{id}/promote", s.handlePromote)
	route("POST /v1/sessions/{id}/snapshots", s.handleSnapshot)
	route("GET /v1/snapshots", s.handleSnapshots)
	route("GET /v1/traces", s.handleTraces)
	route("GET /v1/traces/{id}", s.handleTrace)
	route("POST /v1/snapshots", s.handleImport)
	route("GET /v1/snapshots/{sid}/export", s.handleExport)
	route("GET /v1/backend", s.handleBackend)
	// MCP's streamable HTTP: POST carries messages, GET opens the
	// server's event stream, DELETE ends the MCP session.
	route("POST /v1/mcp", s.handleMCP)
	route("GET /v1/mcp", s.handleMCP)
	route("DELETE /v1/mcp", s.handleMCP)
	mux.HandleFunc("GET /v1/openapi.json", serveOpenAPI)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", s.handleReady)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, sandbox.Errorf(sandbox.ErrNotFound, "no route %s %s (GET /v1/openapi.json lists them)", r.Method, r.URL.Path))
	})
}

// proxiedMethods are the methods the port's HTTP route forwards (GET
// covers HEAD).
var proxiedMethods = []string{"GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

func (s *Server) handleReady(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		writeError(w, sandbox.Wrap("server", sandbox.ErrUnavailable, errClosedServer))
		return
	}
	fmt.Fprintln(w, "ready")
}

// authed authenticates a request and runs h for its tenant, then writes
// the audit line of a mutating request.
func (s *Server) authed(pattern string, h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		t, err := s.authenticate(r)
		if err == nil && t.rate != nil && !t.rate.allow(s.opts.Now()) {
			err = &rateError{fmt.Sprintf("tenant %s: request rate: limit %g a second (bursts of %g); retry later", t.name, t.limits.Rate, 2*t.limits.Rate)}
		}
		if err == nil {
			r.Body = http.MaxBytesReader(rec, r.Body, int64(t.limits.Body))
			err = h(rec, r, t)
		}
		if err != nil {
			s.count(t, err)
			writeError(rec, err)
		}
		// Reads are not audited unless refused; starting or reattaching
		// to a process is (a GET only because a WebSocket begins so).
		if r.Method == http.MethodGet && rec.status < 400 && !strings.Contains(pattern, "/processes") {
			return
		}
		tname := ""
		if t != nil {
			tname = t.name
		}
		sid := r.PathValue("id")
		if rec.session != "" {
			sid = rec.session
		}
		s.log.Info("audit", "tenant", tname, "session", sid, "action", pattern,
			"status", rec.status, "result", result(err), "duration_ms", float64(time.Since(start).Microseconds())/1000)
	})
}

// authenticate finds the tenant of the request's bearer key. A key in the
// query string is refused even when valid: URLs end up in logs and
// proxies' histories.
func (s *Server) authenticate(r *http.Request) (*tenant, error) {
	for name, vals := range r.URL.Query() {
		for _, v := range vals {
			if strings.HasPrefix(v, keyPrefix) || strings.Contains(strings.ToLower(name), "token") || strings.EqualFold(name, "key") {
				return nil, &authError{"an API key goes in the Authorization header (Authorization: Bearer abx_...), never in the URL; revoke a key that was sent in one"}
			}
		}
	}
	h := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || tok == "" {
		return nil, &authError{"missing API key: send Authorization: Bearer abx_... (agentbox serve token create --tenant NAME makes one)"}
	}
	name := s.reg.Authenticate(strings.TrimSpace(tok))
	if name == "" {
		return nil, &authError{"invalid or revoked API key"}
	}
	return s.tenant(name)
}

type authError struct{ msg string }

func (e *authError) Error() string { return e.msg }

// statusWriter records the status written, for the audit log.
type statusWriter struct {
	http.ResponseWriter
	status int
	// session is the session a request made (create, rebuild).
	session string
}

// auditSession names the session a request made, for its audit line.
func auditSession(w http.ResponseWriter, id string) {
	if sw, ok := w.(*statusWriter); ok {
		sw.session = id
	}
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// Flush sends what is buffered (an MCP event stream needs it).
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController and the WebSocket upgrade reach the
// connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// writeError answers err: its kind decides the status, its text is the
// message. A sandbox error that is none of the known kinds is the
// server's fault (500); its message is still the cause.
func writeError(w http.ResponseWriter, err error) {
	status, kind := classify(err)
	writeJSON(w, status, api.Error{Error: api.ErrorBody{Kind: kind, Message: err.Error(), Retryable: sandbox.IsRetryable(err)}})
}

func classify(err error) (int, string) {
	var mbe *http.MaxBytesError
	var ae *authError
	var qe *quotaError
	var re *rateError
	switch {
	case errors.As(err, &ae):
		return http.StatusUnauthorized, api.KindUnauthorized
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge, api.KindTooLarge
	case errors.As(err, &qe):
		return http.StatusForbidden, api.KindQuota
	case errors.As(err, &re):
		return http.StatusTooManyRequests, api.KindRateLimited
	}
	for _, k := range []struct {
		kind   error
		status int
	}{
		{sandbox.ErrNotFound, http.StatusNotFound},
		{sandbox.ErrPathEscape, http.StatusBadRequest},
		{sandbox.ErrInvalid, http.StatusBadRequest},
		{sandbox.ErrPolicyUnsupported, http.StatusUnprocessableEntity},
		{sandbox.ErrGone, http.StatusGone},
		{sandbox.ErrClosed, http.StatusConflict},
		{sandbox.ErrTimeout, http.StatusGatewayTimeout},
		{sandbox.ErrOutputLimit, http.StatusBadRequest},
		{sandbox.ErrUnavailable, http.StatusServiceUnavailable},
		{sandbox.ErrUnsupported, http.StatusNotImplemented},
		{sandbox.ErrPaused, http.StatusConflict},
	} {
		if errors.Is(err, k.kind) {
			return k.status, api.KindOf(k.kind)
		}
	}
	return http.StatusInternalServerError, api.KindInternal
}

type rateError struct{ msg string }

func (e *rateError) Error() string { return e.msg }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// decode reads a request's JSON body into v strictly: unknown fields,
// trailing data and a body over the tenant's limit are errors that say
// so.
func decode(r *http.Request, v any) error {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		return err // a MaxBytesError answers 413
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return sandbox.Errorf(sandbox.ErrInvalid, "request body: %v", jsonProblem(err, data))
	}
	if dec.More() {
		return sandbox.Errorf(sandbox.ErrInvalid, "request body: data after the JSON object")
	}
	return nil
}

// jsonProblem words a JSON decoding error with where it happened.
func jsonProblem(err error, data []byte) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Errorf("malformed JSON at byte %d: %v", se.Offset, se)
	case errors.As(err, &te):
		return fmt.Errorf("field %q: %s is not a %s", te.Field, te.Value, te.Type)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("malformed JSON: the body (%d bytes) ends inside the value", len(data))
	case errors.Is(err, io.EOF):
		return errors.New("empty body; send a JSON object")
	}
	return err
}

// count records a refusal for the tenant's quota or rate.
func (s *Server) count(t *tenant, err error) {
	if t == nil {
		return
	}
	var qe *quotaError
	var re *rateError
	switch {
	case errors.As(err, &qe):
		s.metrics.quotaRefusals.WithLabelValues(t.name, "quota").Inc()
	case errors.As(err, &re):
		s.metrics.quotaRefusals.WithLabelValues(t.name, "rate").Inc()
	}
}

// observe records a finished command.
func (s *Server) observe(t *tenant, d time.Duration, violations int) {
	s.metrics.exec.WithLabelValues(t.name).Observe(d.Seconds())
	if violations > 0 {
		s.metrics.violations.WithLabelValues(t.name).Add(float64(violations))
	}
}
