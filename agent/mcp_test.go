package agent

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox/agentbox/trace"
)

// TestMain lets this test binary be the MCP server the tests start: a
// real program speaking MCP over its stdin and stdout.
func TestMain(m *testing.M) {
	if os.Getenv("AGENTBOX_TEST_MCP_SERVER") == "1" {
		serveTestMCP()
		return
	}
	os.Exit(m.Run())
}

func serveTestMCP() {
	if err := fxMCPServer().Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "test MCP server:", err)
		os.Exit(1)
	}
}

// fxMCPServer has one tool, rate, that knows the dollar only.
func fxMCPServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "fx", Version: "1"}, nil)
	type rateIn struct {
		Currency string `json:"currency" jsonschema:"an ISO 4217 code"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "rate", Description: "The euro rate of a currency on the closing date."},
		func(_ context.Context, _ *mcp.CallToolRequest, in rateIn) (*mcp.CallToolResult, any, error) {
			if in.Currency != "USD" {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no rate for " + in.Currency}}}, nil, nil
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "USD 1.0841"}}}, nil, nil
		})
	return s
}

func fxServer(t *testing.T) *MCPServers {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return &MCPServers{Servers: []MCPServer{{Name: "fx", Command: []string{exe}, Env: map[string]string{"AGENTBOX_TEST_MCP_SERVER": "1"}}}}
}

// The model calls a tool of an MCP server the operator listed: the server
// runs as its own process outside the sandbox, the call and its result are
// traced, a failing call reaches the model as a tool error, and approval
// rules apply to its tools like to any other.
func TestRunnerCallsToolsOfAnMCPServer(t *testing.T) {
	var buf bytes.Buffer
	m := plan("done",
		call("fx__rate", `{"currency":"USD"}`),
		call("fx__rate", `{"currency":"XYZ"}`),
		call("fx__rate", `{"currency":"GBP"}`))
	a := &SandboxAgent{Name: "t", Model: m, Capabilities: []Capability{&Shell{}, fxServer(t)}}
	deny := ApproverFunc(func(_ context.Context, c Call) (bool, error) { return !strings.Contains(c.Arguments, "GBP"), nil })
	res, err := (&Runner{}).Run(context.Background(), a, "rates", RunConfig{Sandbox: SandboxConfig{Client: newClient(t)}, Trace: trace.New(&buf),
		Approvals: []ApprovalRule{{Tool: "fx__rate"}}, Approver: deny})
	if err != nil {
		t.Fatal(err)
	}
	if res.FinalOutput != "done" {
		t.Fatalf("final %q", res.FinalOutput)
	}
	reqs := m.requests()
	var offered bool
	for _, tool := range reqs[0].Tools {
		if tool.Name == "fx__rate" && strings.Contains(string(tool.Parameters), "currency") && tool.Description != "" {
			offered = true
		}
	}
	if !offered {
		t.Errorf("the MCP tool was not offered with its schema: %+v", reqs[0].Tools)
	}
	outs := outputs(reqs[3])
	for i, want := range []string{"USD 1.0841", "error: MCP tool rate failed: no rate for XYZ", "This call was not run"} {
		if !strings.Contains(outs[i], want) {
			t.Errorf("call %d: output %q lacks %q", i+1, outs[i], want)
		}
	}
	var traced bool
	for _, e := range readTrace(t, &buf) {
		if e.Type == trace.ToolResult && e.Tool == "fx__rate" && strings.Contains(e.Output, "USD 1.0841") {
			traced = true
		}
	}
	if !traced {
		t.Error("the MCP call's result is not in the trace")
	}
}

func TestAnMCPServerThatCannotStartFailsTheRun(t *testing.T) {
	for _, tt := range []struct {
		name   string
		server MCPServer
		want   string
	}{
		{"a program that exits", MCPServer{Name: "broken", Command: []string{"false"}}, "MCP server broken: connect"},
		{"neither a command nor a url", MCPServer{Name: "empty"}, "give a command (stdio) or a url"},
		{"a name the model's API refuses", MCPServer{Name: "a b", URL: "http://127.0.0.1:1/mcp"}, `name "a b"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := &SandboxAgent{Name: "t", Model: plan("x"), Capabilities: []Capability{&MCPServers{Servers: []MCPServer{tt.server}}}}
			_, err := (&Runner{}).Run(context.Background(), a, "go", RunConfig{Sandbox: SandboxConfig{Client: newClient(t)}})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
		})
	}
}

// A server reached by URL (streamable HTTP) serves its tools the same way.
func TestRunnerCallsToolsOfAnMCPServerOverHTTP(t *testing.T) {
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return fxMCPServer() }, nil))
	defer srv.Close()
	m := plan("done", call("fx__rate", `{"currency":"USD"}`))
	a := &SandboxAgent{Name: "t", Model: m, Capabilities: []Capability{&MCPServers{Servers: []MCPServer{{Name: "fx", URL: srv.URL}}}}}
	if _, err := (&Runner{}).Run(context.Background(), a, "rates", RunConfig{Sandbox: SandboxConfig{Client: newClient(t)}}); err != nil {
		t.Fatal(err)
	}
	if out := outputs(m.requests()[1]); len(out) != 1 || out[0] != "USD 1.0841" {
		t.Errorf("tool output %q", out)
	}
}
