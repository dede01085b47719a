package agent

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/local"
	"github.com/agentbox/agentbox/snapshot"
)

func TestWorkspacePersistsAcrossRuns(t *testing.T) {
	store, err := snapshot.Open(t.TempDir(), snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	lc, err := local.New(local.Options{Snapshots: store, Warn: io.Discard, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	c := &countingClient{Client: lc}
	first := plan("saved", call("write_file", map[string]any{"path": "notes/state.txt", "content": "remember me\n"}))
	res, err := (&Runner{}).Run(context.Background(), &SandboxAgent{Model: first}, "write", RunConfig{
		Sandbox: SandboxConfig{Client: c, SaveSnapshot: true, Spec: sandbox.Spec{AllowWeaker: true}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Snapshot == "" || res.State.Snapshot != res.Snapshot {
		t.Fatalf("snapshot %q, state snapshot %q", res.Snapshot, res.State.Snapshot)
	}
	if c.only(t).closed() != 1 {
		t.Fatal("first session not closed")
	}
	tests := []struct {
		name string
		sc   SandboxConfig
	}{
		{"a fresh session seeded from the snapshot has the files", SandboxConfig{Client: c, Snapshot: res.Snapshot}},
		{"a session resumed from the saved state has the files", SandboxConfig{Client: lc, State: &res.State}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := plan("read", call("read_file", map[string]any{"path": "notes/state.txt"}))
			if _, err := (&Runner{}).Run(context.Background(), &SandboxAgent{Model: m}, "read", RunConfig{Sandbox: tt.sc}); err != nil {
				t.Fatal(err)
			}
			if out := outputs(m.requests()[1])[0]; !strings.Contains(out, "remember me") {
				t.Fatalf("read_file after restore: %q", out)
			}
		})
	}
}
