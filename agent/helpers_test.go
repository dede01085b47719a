package agent

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"testing"

	"github.com/agentbox/agentbox/agent/model"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/local"
)

// stepModel is an in-test model: each turn it calls next with the request
// and the turn number (1-based) and returns what next returns.
type stepModel struct {
	mu   sync.Mutex
	next func(ctx context.Context, turn int, req model.Request) (*model.Response, error)
	reqs []model.Request
}

func (m *stepModel) Name() string { return "test:step" }

func (m *stepModel) Respond(ctx context.Context, req model.Request) (*model.Response, error) {
	m.mu.Lock()
	m.reqs = append(m.reqs, req)
	turn := len(m.reqs)
	m.mu.Unlock()
	return m.next(ctx, turn, req)
}

func (m *stepModel) requests() []model.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]model.Request(nil), m.reqs...)
}

// plan is a model that makes the given calls, one turn each, then
// answers final.
func plan(final string, calls ...model.Item) *stepModel {
	return &stepModel{next: func(_ context.Context, turn int, _ model.Request) (*model.Response, error) {
		if turn <= len(calls) {
			c := calls[turn-1]
			c.Type = model.ItemFunctionCall
			return &model.Response{Output: []model.Item{c}, Usage: model.Usage{InputTokens: 10, OutputTokens: 2, TotalTokens: 12}}, nil
		}
		return &model.Response{Output: []model.Item{{Type: model.ItemMessage, Role: model.RoleAssistant, Text: final}}, Usage: model.Usage{InputTokens: 10, OutputTokens: 1, TotalTokens: 11}}, nil
	}}
}

func call(name string, args any) model.Item {
	s, ok := args.(string)
	if !ok {
		b, _ := json.Marshal(args)
		s = string(b)
	}
	return model.Item{Type: model.ItemFunctionCall, Name: name, Arguments: s}
}

// outputs are the tool outputs a request carries, in order.
func outputs(req model.Request) []string {
	var out []string
	for _, it := range req.Input {
		if it.Type == model.ItemFunctionCallOutput {
			out = append(out, it.Output)
		}
	}
	return out
}

// countingClient wraps the local backend and remembers every session it
// made, to check that the runner closes what it created.
type countingClient struct {
	sandbox.Client
	mu       sync.Mutex
	sessions []*countingSession
}

func newClient(t *testing.T) *countingClient {
	t.Helper()
	c, err := local.New(local.Options{Warn: io.Discard, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return &countingClient{Client: c}
}

func (c *countingClient) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Session, error) {
	spec.AllowWeaker = true
	s, err := c.Client.Create(ctx, spec)
	if err != nil {
		return nil, err
	}
	cs := &countingSession{Session: s}
	c.mu.Lock()
	c.sessions = append(c.sessions, cs)
	c.mu.Unlock()
	return cs, nil
}

func (c *countingClient) only(t *testing.T) *countingSession {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.sessions) != 1 {
		t.Fatalf("client made %d sessions, want 1", len(c.sessions))
	}
	return c.sessions[0]
}

type countingSession struct {
	sandbox.Session
	mu     sync.Mutex
	closes int
}

func (s *countingSession) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closes++
	s.mu.Unlock()
	return s.Session.Close(ctx)
}

func (s *countingSession) closed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closes
}

// liveSession is a session the test owns, closed at cleanup.
func liveSession(t *testing.T) *countingSession {
	t.Helper()
	c := newClient(t)
	s, err := c.Create(context.Background(), sandbox.Spec{Workspace: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	cs := s.(*countingSession)
	t.Cleanup(func() { _ = cs.Session.Close(context.Background()) })
	return cs
}
