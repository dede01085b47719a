package servecli

import (
	"context"
	"os"
	"time"

	"github.com/agentbox/agentbox/internal/cli"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/remote"
)

// Environment of the remote backend. The key is never a flag: a command
// line is visible to every user of the host.
const (
	serverEnv = "AGENTBOX_SERVER"
	tokenEnv  = "AGENTBOX_TOKEN"
)

// Remote is the remote backend: sessions on the agentbox serve that
// --server or $AGENTBOX_SERVER names, as the tenant of $AGENTBOX_TOKEN.
func Remote(o cli.BackendOptions) (sandbox.Client, error) {
	addr := o.Server
	if addr == "" {
		addr = os.Getenv(serverEnv)
	}
	if addr == "" {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "remote: no server: give --server ADDR or set %s", serverEnv)
	}
	tok := os.Getenv(tokenEnv)
	if tok == "" {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "remote: no API key: set %s (agentbox serve token create --tenant NAME on the server makes one)", tokenEnv)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return remote.New(ctx, remote.Options{Server: addr, Token: tok})
}
