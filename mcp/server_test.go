package mcp

import (
	"context"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/local"
)

// counting is the local backend, counting the sessions closed. The local
// backend confines nothing; these tests are about the server, not the
// sandbox (cmd/agentbox drives the real binary over the native one).
type counting struct {
	*local.Client
	closed atomic.Int64
}

type countedSession struct {
	sandbox.Session
	c *counting
}

func (c *counting) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Session, error) {
	s, err := c.Client.Create(ctx, spec)
	if err != nil {
		return nil, err
	}
	return countedSession{s, c}, nil
}

func (s countedSession) Close(ctx context.Context) error {
	s.c.closed.Add(1)
	return s.Session.Close(ctx)
}

func connect(t *testing.T, opts Options) (*sdk.ClientSession, *counting, *Server) {
	t.Helper()
	lc, err := local.New(local.Options{Warn: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	c := &counting{Client: lc}
	opts.Client, opts.AllowWeaker = c, true
	srv, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	st, ct := sdk.NewInMemoryTransports()
	ctx := context.Background()
	if _, err := srv.sdk.Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close(context.Background()) })
	return cs, c, srv
}

func callText(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol failure: %v", name, err)
	}
	return res.Content[0].(*sdk.TextContent).Text, res.IsError
}

func TestAClientsSessionsAreClosedWhenItDisconnects(t *testing.T) {
	cs, c, _ := connect(t, Options{})
	for range 2 {
		if out, isErr := callText(t, cs, "sandbox_create", nil); isErr {
			t.Fatal(out)
		}
	}
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for c.closed.Load() != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 2 sessions closed after the client left", c.closed.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestKeptSessionsAreHandedOverNotClosed(t *testing.T) {
	var kept []string
	cs, c, srv := connect(t, Options{Keep: true, OnKeep: func(st sandbox.State, _ string) error {
		if !st.Spec.Detached {
			t.Errorf("kept session %s is not detached", st.ID)
		}
		kept = append(kept, st.ID)
		return nil
	}})
	out, isErr := callText(t, cs, "sandbox_create", nil)
	if isErr || len(kept) != 1 || !strings.Contains(out, kept[0]) {
		t.Fatalf("sandbox_create = %q, kept %v", out, kept)
	}
	_ = cs.Close()
	srv.Close(context.Background())
	if n := c.closed.Load(); n != 0 {
		t.Fatalf("%d kept sessions were closed", n)
	}
	_ = c.Client.Delete(context.Background(), sandbox.State{ID: kept[0]})
}

func TestACeilingRefusalIsAToolErrorNamingTheLimit(t *testing.T) {
	cs, c, _ := connect(t, Options{Ceiling: sandbox.Policy{Resources: sandbox.Resources{MemoryBytes: 64 << 20}}})
	out, isErr := callText(t, cs, "sandbox_create", map[string]any{"memory": "1G"})
	if !isErr || !strings.Contains(out, "memory 1073741824 bytes is above the operator's ceiling of 67108864 bytes") {
		t.Fatalf("sandbox_create above the ceiling = %q (error %v)", out, isErr)
	}
	if n := c.closed.Load(); n != 0 {
		t.Fatalf("a refused create made %d sessions", n)
	}
}
