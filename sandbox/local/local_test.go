package local_test

import (
	"bytes"
	"io"
	"log/slog"
	"testing"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/local"
	"github.com/agentbox/agentbox/sandbox/sandboxtest"
	"github.com/agentbox/agentbox/snapshot"
)

func conformance(t *testing.T, store sandbox.SnapshotStore) {
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
	}, sandboxtest.WithSnapshots(store), sandboxtest.WithSpec(func(sp *sandbox.Spec) { sp.AllowWeaker = true }),
		sandboxtest.NoPause("the local backend runs commands as plain host processes, with nothing to freeze them as one"))
}

func TestConformance(t *testing.T) {
	conformance(t, sandboxtest.NewDirStore(t.TempDir()))
}

func TestConformanceWithTheSnapshotPackage(t *testing.T) {
	store, err := snapshot.Open(t.TempDir(), snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	conformance(t, store)
}
