package docker

import (
	"testing"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/sandboxtest"
	"github.com/agentbox/agentbox/snapshot"
)

func TestConformance(t *testing.T) {
	testClient(t) // skip or fail early when no engine answers
	store, err := snapshot.Open(t.TempDir(), snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sandboxtest.Run(t, func(t *testing.T) sandbox.Client {
		c, err := New(Options{Snapshots: store})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}, sandboxtest.WithSnapshots(store))
}
