package local_test

import (
	"bytes"
	"io"
	"log/slog"
	"testing"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/local"
	"github.com/agentbox/agentbox/sandbox/sandboxtest"
)

func TestConformance(t *testing.T) {
	store := sandboxtest.NewDirStore(t.TempDir())
	sandboxtest.Run(t, func(t *testing.T) sandbox.Client {
		c, err := local.New(local.Options{
			Snapshots: store,
			Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
			Warn:      &bytes.Buffer{},
		})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}, sandboxtest.WithSnapshots(store), sandboxtest.WithSpec(func(sp *sandbox.Spec) { sp.AllowWeaker = true }))
}
