package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox/agentbox/agent/model"
	"github.com/agentbox/agentbox/sandbox"
)

// MCPServer is an MCP server whose tools the model may call. It runs
// outside the sandbox, under the operator's control: a program started
// with Command (stdio), or a server at URL (streamable HTTP). Its calls
// are traced and matched by approval rules like any tool's.
type MCPServer struct {
	// Name prefixes its tools' names ("rates" gives "rates__lookup"), so
	// two servers cannot shadow each other or a built-in tool.
	Name string
	// Command is the program and its arguments, started in Dir with the
	// operator's environment plus Env. Exactly one of Command and URL.
	Command []string
	Dir     string
	Env     map[string]string
	// URL is a streamable HTTP endpoint.
	URL string
}

// MCPServers is the capability that connects to MCP servers when a run
// starts, offers their tools, and disconnects (ending the programs it
// started) when the run ends.
type MCPServers struct {
	Servers []MCPServer
	// ConnectTimeout bounds connecting and listing tools, per server
	// (default 30 s).
	ConnectTimeout time.Duration

	mu       sync.Mutex
	sessions []*mcp.ClientSession
	tools    []Tool
}

// mcpName is what a server's name must look like: tool names reach the
// model, whose APIs allow [a-zA-Z0-9_-] only.
var mcpName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,32}$`)

// Name implements Capability.
func (m *MCPServers) Name() string { return "mcp" }

// Instructions implements Capability.
func (m *MCPServers) Instructions() string {
	names := make([]string, len(m.Servers))
	for i, s := range m.Servers {
		names[i] = s.Name
	}
	return "# MCP tools\nTools named SERVER__TOOL come from the operator's MCP servers (" + strings.Join(names, ", ") + "); they run outside the sandbox and do not see its files."
}

// Start connects to every server and lists its tools; a server that
// cannot be reached fails the run before the model is asked anything.
func (m *MCPServers) Start(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	timeout := m.ConnectTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	for _, s := range m.Servers {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		err := m.connect(cctx, s)
		cancel()
		if err != nil {
			m.closeLocked()
			return fmt.Errorf("agent: MCP server %s: %w", s.Name, err)
		}
	}
	return nil
}

func (m *MCPServers) connect(ctx context.Context, s MCPServer) error {
	if !mcpName.MatchString(s.Name) {
		return fmt.Errorf("name %q must be 1-32 letters, digits, _ or -", s.Name)
	}
	var t mcp.Transport
	switch {
	case len(s.Command) > 0 && s.URL == "":
		// Not CommandContext: the program lives as long as the run, not
		// as long as this connection attempt.
		cmd := exec.Command(s.Command[0], s.Command[1:]...)
		cmd.Dir = s.Dir
		cmd.Env = os.Environ()
		for k, v := range s.Env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		cmd.Stderr = os.Stderr
		t = &mcp.CommandTransport{Command: cmd}
	case s.URL != "" && len(s.Command) == 0:
		t = &mcp.StreamableClientTransport{Endpoint: s.URL, DisableStandaloneSSE: true}
	default:
		return errors.New("give a command (stdio) or a url (streamable HTTP), not both")
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "agentbox", Version: "1"}, nil)
	cs, err := client.Connect(ctx, t, nil)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	m.sessions = append(m.sessions, cs)
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("list tools: %w", err)
		}
		schema, err := json.Marshal(tool.InputSchema)
		if err != nil || string(schema) == "null" {
			schema = []byte(`{"type":"object","properties":{}}`)
		}
		name := s.Name + "__" + tool.Name
		m.tools = append(m.tools, Tool{
			Spec: model.Tool{Name: name, Description: tool.Description, Parameters: schema},
			Call: mcpCall(cs, tool.Name),
		})
	}
	return nil
}

// mcpCall calls one tool of a server; a result the server marks as an
// error reaches the model as a tool error.
func mcpCall(cs *mcp.ClientSession, name string) func(context.Context, json.RawMessage) (string, error) {
	return func(ctx context.Context, args json.RawMessage) (string, error) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			return "", fmt.Errorf("MCP tool %s: %w", name, err)
		}
		var b strings.Builder
		for _, c := range res.Content {
			switch c := c.(type) {
			case *mcp.TextContent:
				b.WriteString(c.Text)
			default:
				data, _ := json.Marshal(c)
				b.Write(data)
			}
		}
		if res.IsError {
			return "", fmt.Errorf("MCP tool %s failed: %s", name, b.String())
		}
		return b.String(), nil
	}
}

// Tools implements Capability: the tools listed by Start.
func (m *MCPServers) Tools(sandbox.Session) []Tool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.tools
}

// CloseSession implements SessionCloser: it disconnects from every
// server, which ends the programs it started.
func (m *MCPServers) CloseSession(context.Context, sandbox.Session) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closeLocked()
}

func (m *MCPServers) closeLocked() error {
	var errs []error
	for _, cs := range m.sessions {
		if err := cs.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	m.sessions, m.tools = nil, nil
	return errors.Join(errs...)
}
