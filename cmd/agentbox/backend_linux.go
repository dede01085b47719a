package main

import (
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/linux"
)

// The native linux backend. Its sessions' init is this very binary,
// re-executed: linux.Main takes the process over when it was started as
// one, before cobra sees the arguments.
func init() {
	reexecHooks = append(reexecHooks, linux.Main)
	backends["linux"] = func(opts backendOptions) (sandbox.Client, error) {
		return linux.New(linux.Options{Snapshots: opts.Snapshots, Logger: opts.Logger})
	}
}
