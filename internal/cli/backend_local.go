package cli

import (
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/local"
)

// Local is the unconfined backend, for development on hosts without
// namespaces. It refuses every policy part but timeouts and the output cap
// unless --allow-weaker, and warns on every session that it confines
// nothing.
func Local(opts BackendOptions) (sandbox.Client, error) {
	return local.New(local.Options{Snapshots: opts.Snapshots, Logger: opts.Logger, Warn: opts.Warn})
}
