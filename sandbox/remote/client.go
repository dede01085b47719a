// Package remote is the sandbox backend that runs sessions on an agentbox
// server (agentbox serve) through its HTTP API: a sandbox.Client whose
// sessions live on the server's backend, in the tenant the API key names.
// It passes the same conformance suite as the backends it fronts.
package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/server/api"
)

// Options configure a Client.
type Options struct {
	// Server is the server's address: http(s)://host:port, or a unix
	// socket as unix:/path or an absolute path.
	Server string
	// Token is the tenant's API key (abx_...).
	Token string
	// HTTPClient, when set, is used for every request (its own TLS
	// configuration, proxies, timeouts); with a unix socket it is ignored.
	HTTPClient *http.Client
}

// Client is the remote backend.
type Client struct {
	server   string // the address as given (Options.Server)
	base     string // http://host[:port] or https://...
	token    string
	hc       *http.Client
	backend  string
	enforces []sandbox.Part
}

var _ sandbox.Client = (*Client)(nil)

// handles is the remote part of a State: which backend the server runs
// the session on, and the server's address (never its key), so that a
// later program asks the right server about it.
type handles struct {
	Backend string `json:"backend"`
	Server  string `json:"server,omitempty"`
}

// New connects to the server and asks what its backend enforces; it
// fails with ErrUnavailable when the server cannot be reached.
func New(ctx context.Context, opts Options) (*Client, error) {
	if opts.Server == "" {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "remote: no server address (--server or AGENTBOX_SERVER)")
	}
	if opts.Token == "" {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "remote: no API key (AGENTBOX_TOKEN; agentbox serve token create makes one)")
	}
	c := &Client{server: opts.Server, token: opts.Token, hc: opts.HTTPClient}
	if c.hc == nil {
		c.hc = &http.Client{}
	}
	switch {
	case strings.HasPrefix(opts.Server, "unix:") || strings.HasPrefix(opts.Server, "/"):
		path := strings.TrimPrefix(strings.TrimPrefix(opts.Server, "unix://"), "unix:")
		c.base = "http://agentbox"
		c.hc = &http.Client{Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", path)
			},
			MaxIdleConnsPerHost: 64,
		}}
	default:
		u, err := url.Parse(opts.Server)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, sandbox.Errorf(sandbox.ErrInvalid, "remote: server %q: want http(s)://HOST:PORT or unix:/PATH", opts.Server)
		}
		c.base = strings.TrimSuffix(u.Scheme+"://"+u.Host+u.Path, "/")
	}
	var b api.Backend
	if err := c.do(ctx, "remote: connect", "GET", "/v1/backend", nil, &b); err != nil {
		return nil, err
	}
	c.backend, c.enforces = b.Name, b.Enforces
	return c, nil
}

// Name is "remote".
func (c *Client) Name() string { return "remote" }

// Enforces is what the server's backend enforces, as it said at New.
func (c *Client) Enforces() []sandbox.Part { return c.enforces }

// Backend is the server's backend ("linux", "docker").
func (c *Client) Backend() string { return c.backend }

// Create creates a session on the server.
func (c *Client) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Session, error) {
	if len(spec.Policy.Network.Secrets) > 0 {
		// Secrets are never serialized: sending the spec would drop them
		// silently, and the server reads only its operator's.
		return nil, sandbox.Errorf(sandbox.ErrPolicyUnsupported, "remote: create: network credentials stay with the process that runs the egress proxy, here the server: its operator gives them per tenant (credentials in the server config)")
	}
	var s api.Session
	if err := c.do(ctx, "remote: create", "POST", "/v1/sessions", api.CreateSession{Spec: spec}, &s); err != nil {
		return nil, err
	}
	return c.session(s), nil
}

// Resume reattaches to a session the server still runs; one it no longer
// has, or whose sandbox is gone, is ErrGone.
func (c *Client) Resume(ctx context.Context, st sandbox.State) (sandbox.Session, error) {
	if err := c.check(st); err != nil {
		return nil, err
	}
	var s api.Session
	err := c.do(ctx, "remote: resume", "GET", "/v1/sessions/"+url.PathEscape(st.ID), nil, &s)
	switch {
	case errors.Is(err, sandbox.ErrNotFound):
		return nil, sandbox.Wrap("remote: resume "+st.ID, sandbox.ErrGone, err)
	case err != nil:
		return nil, err
	case s.Status == api.StatusGone:
		return nil, sandbox.Errorf(sandbox.ErrGone, "remote: resume %s: the server reports its sandbox gone", st.ID)
	}
	return c.session(s), nil
}

// Rebuild asks the server to rebuild a gone session; when the server no
// longer has it (it was deleted), a new session is made from its last
// snapshot, which the tenant keeps.
func (c *Client) Rebuild(ctx context.Context, st sandbox.State) (sandbox.Session, error) {
	if err := c.check(st); err != nil {
		return nil, err
	}
	var s api.Session
	err := c.do(ctx, "remote: rebuild", "POST", "/v1/sessions/"+url.PathEscape(st.ID)+"/rebuild", nil, &s)
	if errors.Is(err, sandbox.ErrNotFound) {
		if st.Snapshot == "" {
			return nil, sandbox.Wrap("remote: rebuild "+st.ID, sandbox.ErrNotFound, errors.New("the server no longer has the session and it left no snapshot"))
		}
		spec := st.Spec
		spec.Snapshot = st.Snapshot
		return c.Create(ctx, spec)
	}
	if err != nil {
		return nil, err
	}
	return c.session(s), nil
}

// Delete deletes the session st names; one the server no longer has is
// not an error.
func (c *Client) Delete(ctx context.Context, st sandbox.State) error {
	if err := c.check(st); err != nil {
		return err
	}
	err := c.do(ctx, "remote: delete", "DELETE", "/v1/sessions/"+url.PathEscape(st.ID), nil, nil)
	if errors.Is(err, sandbox.ErrNotFound) {
		return nil
	}
	return err
}

// Status is what the server says of the session st describes:
// "running", "paused" or "gone" (the server no longer has it, or its
// sandbox died). It fails when the server cannot be asked, or when st is a
// session of another server than this client's.
func (c *Client) Status(ctx context.Context, st sandbox.State) (string, error) {
	if err := c.check(st); err != nil {
		return "", err
	}
	var h handles
	if err := sandbox.DecodeHandles(st, &h, nil); err == nil && h.Server != "" && h.Server != c.server {
		return "", sandbox.Errorf(sandbox.ErrInvalid, "remote: session %s is on server %s, not %s", st.ID, h.Server, c.server)
	}
	var s api.Session
	err := c.do(ctx, "remote: status", "GET", "/v1/sessions/"+url.PathEscape(st.ID), nil, &s)
	switch {
	case errors.Is(err, sandbox.ErrNotFound):
		return api.StatusGone, nil
	case err != nil:
		return "", err
	}
	return s.Status, nil
}

func (c *Client) check(st sandbox.State) error {
	if st.Backend != c.Name() {
		return sandbox.Errorf(sandbox.ErrInvalid, "remote: state of a %s session, not a remote one", st.Backend)
	}
	return nil
}

// do sends one request with a JSON body (or raw bytes) and decodes a JSON
// answer into out (or copies raw bytes into a *[]byte).
func (c *Client) do(ctx context.Context, op, method, path string, body, out any) error {
	var rd io.Reader
	ctype := "application/json"
	switch b := body.(type) {
	case nil:
	case []byte:
		rd, ctype = bytes.NewReader(b), "application/octet-stream"
	default:
		data, err := json.Marshal(b)
		if err != nil {
			return sandbox.Wrap(op, sandbox.ErrInvalid, err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return sandbox.Wrap(op, sandbox.ErrInvalid, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if rd != nil {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return sandbox.Wrap(op, nil, err)
		}
		return &sandbox.Error{Op: op, Kind: sandbox.ErrUnavailable, Err: err, Retryable: true}
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		return decodeError(op, resp)
	}
	switch o := out.(type) {
	case nil:
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	case *[]byte:
		*o, err = io.ReadAll(resp.Body)
	default:
		err = json.NewDecoder(resp.Body).Decode(out)
	}
	if err != nil {
		return &sandbox.Error{Op: op, Kind: sandbox.ErrUnavailable, Err: fmt.Errorf("read the answer: %w", err), Retryable: true}
	}
	return nil
}

// decodeError turns a server's error answer back into a sandbox error of
// the same kind.
func decodeError(op string, resp *http.Response) error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var e api.Error
	if err := json.Unmarshal(data, &e); err != nil || e.Error.Message == "" {
		return &sandbox.Error{Op: op, Kind: sandbox.ErrUnavailable, Err: fmt.Errorf("server answered %s: %.200s", resp.Status, data)}
	}
	return fromBody(op, e.Error)
}

func fromBody(op string, b api.ErrorBody) error {
	return &sandbox.Error{Op: op, Kind: api.SandboxKind(b.Kind), Err: errors.New(b.Message), Retryable: b.Retryable}
}

// session is the remote session s describes.
func (c *Client) session(s api.Session) *session {
	st := sandbox.State{Version: sandbox.StateVersion, Backend: c.Name(), ID: s.ID, Spec: s.Spec, Snapshot: s.Snapshot,
		Workspace: s.Workspace, OwnsWorkspace: s.OwnsWorkspace,
		Handles: sandbox.EncodeHandles(handles{Backend: s.Backend, Server: c.server}), CreatedAt: s.CreatedAt}
	return &session{c: c, st: st}
}

// dialTimeout bounds the WebSocket handshake of a streamed command.
const dialTimeout = 30 * time.Second
