package linux

import (
	"io"
	"log/slog"
	"testing"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/linux/internal/asnobody"
	"github.com/agentbox/agentbox/sandbox/sandboxtest"
)

func TestConformance(t *testing.T) {
	if !asnobody.Child() {
		newTestClient(t) // skips when the backend cannot run here
	}
	store := sandboxtest.NewDirStore(t.TempDir())
	dir := t.TempDir()
	opts := []sandboxtest.Option{sandboxtest.WithSnapshots(store)}
	if asnobody.Child() {
		opts = append(opts, sandboxtest.NoPause("a rootless session has no cgroup2 group of its own to freeze"))
	}
	sandboxtest.Run(t, func(t *testing.T) sandbox.Client {
		c, err := New(Options{StateDir: dir, Snapshots: store, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}, opts...)
}
