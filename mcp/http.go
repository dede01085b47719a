package mcp

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// HTTPOptions configure the streamable HTTP transport.
type HTTPOptions struct {
	// Token is the bearer token every request must carry
	// (Authorization: Bearer TOKEN). It is required: an MCP endpoint
	// runs commands, so it never serves anonymous callers.
	Token string
	// IdleTimeout closes a client's MCP session, and so its sandboxes,
	// when it sends nothing for this long (default 30 minutes): an HTTP
	// client can vanish without a goodbye.
	IdleTimeout time.Duration
}

// MinTokenLength is the shortest bearer token accepted.
const MinTokenLength = 16

// Handler serves MCP over streamable HTTP. Each MCP session
// (Mcp-Session-Id) is a client owning its sandboxes, closed when the
// client ends the session (HTTP DELETE) or it stays idle past
// IdleTimeout. Requests without the bearer token get 401.
func (s *Server) Handler(opts HTTPOptions) (http.Handler, error) {
	if len(opts.Token) < MinTokenLength {
		return nil, fmt.Errorf("mcp: the HTTP transport needs a bearer token of at least %d characters (it runs commands for whoever holds it)", MinTokenLength)
	}
	return bearer(opts.Token, s.Streamable(opts.IdleTimeout)), nil
}

// Streamable serves MCP over streamable HTTP with no authentication of
// its own, for a host that authenticates every request before it (agentbox
// serve, mounting one Server per tenant, built over that tenant's
// admitted sandbox.Client); Handler is it behind a bearer token. idle as
// HTTPOptions.IdleTimeout.
func (s *Server) Streamable(idle time.Duration) http.Handler {
	if idle <= 0 {
		idle = 30 * time.Minute
	}
	return sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.sdk },
		&sdk.StreamableHTTPOptions{SessionTimeout: idle, Logger: s.log})
}

// bearer admits requests carrying token, compared in constant time.
func bearer(token string, next http.Handler) http.Handler {
	want := []byte(token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="agentbox mcp"`)
			http.Error(w, "agentbox mcp: missing or wrong bearer token (Authorization: Bearer TOKEN)", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// ServeHTTP serves MCP on l at path /mcp until ctx ends, then shuts the
// listener down and closes (or keeps) every client's sandboxes.
func (s *Server) ServeHTTP(ctx context.Context, l net.Listener, opts HTTPOptions) error {
	h, err := s.Handler(opts)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(l) }()
	select {
	case err = <-done:
		s.Close(context.WithoutCancel(ctx))
	case <-ctx.Done():
		// Closing the clients' sessions first ends their event streams,
		// which Shutdown would otherwise wait for.
		s.Close(context.WithoutCancel(ctx))
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
		err = <-done
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
