package main

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/sandbox"
)

// backendOptions is what the CLI hands every backend constructor.
type backendOptions struct {
	Snapshots sandbox.SnapshotStore
	Logger    *slog.Logger
	Image     string
	Warn      io.Writer
	// FirstSession says a session is created right after the backend is
	// opened (exec): a backend may start preparing it (see
	// linux.Options.FirstSession).
	FirstSession bool
}

// backends maps a --backend name to its constructor. Each backend's file
// (backend_linux.go, backend_docker.go, ...) adds itself in init.
var backends = map[string]func(opts backendOptions) (sandbox.Client, error){}

// backendNames lists the registered backends, sorted, for help texts.
func backendNames() string {
	names := make([]string, 0, len(backends))
	for n := range backends {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, "|")
}

// openBackend builds the named backend's client.
func openBackend(name string, opts backendOptions) (sandbox.Client, error) {
	newClient, ok := backends[name]
	if !ok {
		return nil, fmt.Errorf("unknown backend %q (choose one of %s)", name, backendNames())
	}
	c, err := newClient(opts)
	if err != nil {
		return nil, fmt.Errorf("backend %s: %w", name, err)
	}
	return c, nil
}
