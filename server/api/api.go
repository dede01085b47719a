// Package api is the wire format of agentbox serve: the JSON bodies of its
// HTTP routes and the messages of its WebSocket exec stream, shared by the
// server and its Go client (sandbox/remote). Any other client speaks the
// same JSON; the server serves the OpenAPI 3 description at /v1/openapi.json.
package api

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/agentbox/agentbox/manifest"
	"github.com/agentbox/agentbox/sandbox"
)

// Version prefixes every route: /v1/sessions, ...
const Version = "v1"

// CreateSession is the body of POST /v1/sessions.
type CreateSession struct {
	// Spec is the session's spec. The server sets Detached (its sessions
	// outlive any one request) and refuses what the tenant may not ask
	// for: a host workspace or mount outside the tenant's base, host
	// network, a policy above the tenant's ceiling.
	Spec sandbox.Spec `json:"spec"`
	// Manifest, when set, is what the session's workspace starts with
	// (files, directories, git checkouts, read-only mounts; the schema of
	// agentbox exec --manifest). It is untrusted: it carries no grants,
	// and its host sources lie under the tenant's host base or are
	// refused. The server makes the workspace and removes it with the
	// session, so Spec.Workspace and Spec.Snapshot must be empty.
	Manifest *manifest.Manifest `json:"manifest,omitempty"`
	// TTL ends the session this long after its creation; zero takes the
	// tenant's default.
	TTL Duration `json:"ttl,omitempty"`
	// IdleTimeout ends the session when no request touched it for this
	// long; zero takes the tenant's default.
	IdleTimeout Duration `json:"idle_timeout,omitempty"`
}

// UpdateSession is the body of PATCH /v1/sessions/{id}: a new lifetime.
type UpdateSession struct {
	// TTL, when set, ends the session this long from now (at most the
	// tenant's TTL).
	TTL Duration `json:"ttl,omitempty"`
	// IdleTimeout, when set, replaces the idle timeout (at most the
	// tenant's TTL).
	IdleTimeout Duration `json:"idle_timeout,omitempty"`
}

// Session is what the server reports of a session.
type Session struct {
	ID string `json:"id"`
	// Status is StatusRunning; StatusPaused while its processes are
	// frozen (POST .../pause); StatusGone when its sandbox died without
	// being deleted (what it left can be rebuilt).
	Status    string    `json:"status"`
	Backend   string    `json:"backend"`
	CreatedAt time.Time `json:"created_at"`
	// ExpiresAt is when the TTL ends it; zero for none.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// IdleTimeout ends it when idle this long; zero for none.
	IdleTimeout Duration `json:"idle_timeout,omitempty"`
	// Snapshot is the latest snapshot taken of its workspace.
	Snapshot string `json:"snapshot,omitempty"`
	// Workspace is the workspace's directory on the server's host, and
	// OwnsWorkspace says the session made it (and removes it).
	Workspace     string `json:"workspace,omitempty"`
	OwnsWorkspace bool   `json:"owns_workspace,omitempty"`
	// Spec is the spec it runs with, as the server completed it.
	Spec sandbox.Spec `json:"spec"`
}

// Session statuses.
const (
	StatusRunning = "running"
	StatusPaused  = "paused"
	StatusGone    = "gone"
)

// SessionList is the body of GET /v1/sessions.
type SessionList struct {
	Sessions []Session `json:"sessions"`
}

// Exec is the body of POST /v1/sessions/{id}/exec (run to completion) and
// the first message of a WebSocket exec stream.
type Exec struct {
	Cmd     []string          `json:"cmd"`
	Workdir string            `json:"workdir,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	// Stdin is the command's whole standard input (run to completion
	// only; a stream sends it as it goes).
	Stdin *Blob `json:"stdin,omitempty"`
	// Timeout lowers the policy's exec timeout; it never raises it.
	Timeout Duration `json:"timeout,omitempty"`
	// MaxOutput lowers the policy's per-stream output cap.
	MaxOutput int64  `json:"max_output,omitempty"`
	TTY       bool   `json:"tty,omitempty"`
	Rows      uint16 `json:"rows,omitempty"`
	Cols      uint16 `json:"cols,omitempty"`
}

// Request is e as a sandbox.ExecRequest (without Stdin).
func (e Exec) Request() sandbox.ExecRequest {
	return sandbox.ExecRequest{Cmd: e.Cmd, Workdir: e.Workdir, Env: e.Env, Timeout: time.Duration(e.Timeout),
		MaxOutput: e.MaxOutput, TTY: e.TTY, Rows: e.Rows, Cols: e.Cols}
}

// FromRequest is the wire form of r (without Stdin).
func FromRequest(r sandbox.ExecRequest) Exec {
	return Exec{Cmd: r.Cmd, Workdir: r.Workdir, Env: r.Env, Timeout: Duration(r.Timeout),
		MaxOutput: r.MaxOutput, TTY: r.TTY, Rows: r.Rows, Cols: r.Cols}
}

// ExecResult is the answer of POST /v1/sessions/{id}/exec.
type ExecResult struct {
	sandbox.ExitStatus
	Stdout          Blob     `json:"stdout"`
	Stderr          Blob     `json:"stderr"`
	Duration        Duration `json:"duration"`
	OutputTruncated bool     `json:"output_truncated,omitempty"`
}

// FileList is the body of GET /v1/sessions/{id}/dir.
type FileList struct {
	Files []sandbox.FileInfo `json:"files"`
}

// ArchiveResult is the answer of PUT /v1/sessions/{id}/archive: how many
// files and directories the archive wrote.
type ArchiveResult struct {
	Files int `json:"files"`
	Dirs  int `json:"dirs"`
}

// Promote is the body of POST /v1/sessions/{id}/promote.
type Promote struct {
	// Rules are artifact rules as agentbox promote reads them, in JSON
	// ({"outputs": [{"glob": "out/*.csv", "types": ["text/csv"]}]}),
	// without json_schema.
	Rules json.RawMessage `json:"rules"`
	// RunID is copied into the provenance record.
	RunID string `json:"run_id,omitempty"`
}

// Promoted is the answer of a promotion that passed: the provenance
// record (agentbox-provenance.json) and the checked files by
// workspace-relative path.
type Promoted struct {
	Record json.RawMessage `json:"record"`
	Files  map[string]Blob `json:"files"`
}

// TraceInfo is one of a tenant's session traces.
type TraceInfo struct {
	Session string    `json:"session"`
	Size    int64     `json:"size"`
	ModTime time.Time `json:"mod_time"`
}

// TraceList is the body of GET /v1/traces.
type TraceList struct {
	Traces []TraceInfo `json:"traces"`
}

// Snapshot is the answer of POST /v1/sessions/{id}/snapshots.
type Snapshot struct {
	ID string `json:"id"`
}

// Backend is the answer of GET /v1/backend: the backend the server runs
// sessions on and the policy parts it enforces on the server's host.
type Backend struct {
	Name     string         `json:"name"`
	Enforces []sandbox.Part `json:"enforces"`
}

// SnapshotInfo is one of a tenant's snapshots.
type SnapshotInfo struct {
	ID        string    `json:"id"`
	Session   string    `json:"session,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// SnapshotList is the body of GET /v1/snapshots.
type SnapshotList struct {
	Snapshots []SnapshotInfo `json:"snapshots"`
}

// Error is the body of every 4xx and 5xx answer.
type Error struct {
	Error ErrorBody `json:"error"`
}

// ErrorBody says what went wrong: Kind is one of the Kind* names (a
// sandbox error kind), Message is for a person.
type ErrorBody struct {
	Kind      string `json:"kind"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable,omitempty"`
}

// Error kinds on the wire, one per sandbox error kind, plus the server's
// own (unauthorized, quota, too_large, rate_limited).
const (
	KindInvalid           = "invalid"
	KindNotFound          = "not_found"
	KindPathEscape        = "path_escape"
	KindPolicyUnsupported = "policy_unsupported"
	KindTimeout           = "timeout"
	KindOutputLimit       = "output_limit"
	KindClosed            = "closed"
	KindGone              = "gone"
	KindUnavailable       = "unavailable"
	KindUnsupported       = "unsupported"
	KindPaused            = "paused"
	KindUnauthorized      = "unauthorized"
	KindQuota             = "quota"
	KindTooLarge          = "too_large"
	KindRateLimited       = "rate_limited"
	KindInternal          = "internal"
)

// kinds pairs the wire kinds with the sandbox error kinds.
var kinds = []struct {
	name string
	err  error
}{
	{KindInvalid, sandbox.ErrInvalid},
	{KindNotFound, sandbox.ErrNotFound},
	{KindPathEscape, sandbox.ErrPathEscape},
	{KindPolicyUnsupported, sandbox.ErrPolicyUnsupported},
	{KindTimeout, sandbox.ErrTimeout},
	{KindOutputLimit, sandbox.ErrOutputLimit},
	{KindClosed, sandbox.ErrClosed},
	{KindGone, sandbox.ErrGone},
	{KindUnavailable, sandbox.ErrUnavailable},
	{KindUnsupported, sandbox.ErrUnsupported},
	{KindPaused, sandbox.ErrPaused},
}

// KindOf is the wire kind of a sandbox error kind, "" for none.
func KindOf(kind error) string {
	for _, k := range kinds {
		if k.err == kind {
			return k.name
		}
	}
	return ""
}

// SandboxKind is the sandbox error kind of a wire kind; nil for the
// server's own kinds and unknown ones.
func SandboxKind(name string) error {
	for _, k := range kinds {
		if k.name == name {
			return k.err
		}
	}
	return nil
}

// Duration is a time.Duration written as a Go duration string ("1m30s")
// and read from one or from a number of nanoseconds.
type Duration time.Duration

// MarshalJSON writes d as "1m30s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads "1m30s" or a number of nanoseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var n int64
		if err := json.Unmarshal(b, &n); err != nil {
			return fmt.Errorf("a duration is a string like \"30s\" or a number of nanoseconds, not %s", b)
		}
		*d = Duration(n)
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Blob is bytes on the wire: a JSON string when they are valid UTF-8 (what
// a person reads with curl), else {"base64": "..."}. Both forms are read.
type Blob []byte

type blobB64 struct {
	Base64 string `json:"base64"`
}

// MarshalJSON writes b as a string or as {"base64": ...}.
func (b Blob) MarshalJSON() ([]byte, error) {
	if utf8.Valid(b) {
		return json.Marshal(string(b))
	}
	return json.Marshal(blobB64{base64.StdEncoding.EncodeToString(b)})
}

// UnmarshalJSON reads a string or {"base64": ...}.
func (b *Blob) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err == nil {
		*b = Blob(s)
		return nil
	}
	var o blobB64
	if err := json.Unmarshal(data, &o); err != nil {
		return fmt.Errorf("bytes are a JSON string or {\"base64\": \"...\"}, not %.40s", data)
	}
	v, err := base64.StdEncoding.DecodeString(o.Base64)
	if err != nil {
		return fmt.Errorf("base64: %w", err)
	}
	*b = v
	return nil
}
