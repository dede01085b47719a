package mcp

import (
	"context"
	"io"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox/agentbox/sandbox/local"
)

const operatorFile = `
policy:
  memory: 1G
  timeout: 5m
presets:
  default: {memory: 256M}
  small: {memory: 64M, timeout: 10s}
approvals:
  - tool: exec
    match: 'rm\s+-rf'
`

func TestTheOperatorsFileGivesCeilingPresetsAndApprovals(t *testing.T) {
	c, err := ParseConfig([]byte(operatorFile))
	if err != nil {
		t.Fatal(err)
	}
	if c.Ceiling.Resources.MemoryBytes != 1<<30 || c.Presets["small"].Resources.MemoryBytes != 64<<20 || len(c.Approvals) != 1 {
		t.Fatalf("config %+v", c)
	}
	for _, bad := range []struct{ file, want string }{
		{"policy: {memory: 1G}\npresets: {big: {memory: 2G}}\n", "presets.big: policy: memory"},
		{"policy: {memroy: 1G}\n", "memroy"},
		{"approvals: [{match: '('}]\n", "approvals[0].match"},
		{"approvals: [{}]\n", "approvals[0] needs a tool or a match"},
	} {
		if _, err := ParseConfig([]byte(bad.file)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("ParseConfig(%q) = %v, want an error with %q", bad.file, err, bad.want)
		}
	}
}

// connectWith serves the operator's file to a client whose user answers
// elicitations with answer ("" : a client that cannot ask its user).
func connectWith(t *testing.T, answer string) *sdk.ClientSession {
	t.Helper()
	c, err := ParseConfig([]byte(operatorFile))
	if err != nil {
		t.Fatal(err)
	}
	lc, err := local.New(local.Options{Warn: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Options{Client: lc, AllowWeaker: true, Ceiling: c.Ceiling, Presets: c.Presets, Approvals: c.Approvals})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close(context.Background()) })
	st, ct := sdk.NewInMemoryTransports()
	if _, err := srv.sdk.Connect(context.Background(), st, nil); err != nil {
		t.Fatal(err)
	}
	var opts *sdk.ClientOptions
	if answer != "" {
		opts = &sdk.ClientOptions{ElicitationHandler: func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			return &sdk.ElicitResult{Action: answer}, nil
		}}
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test"}, opts).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func TestPresetsStartSessionsWithinTheCeiling(t *testing.T) {
	cs := connectWith(t, "accept")
	out, isErr := callText(t, cs, "sandbox_create", nil)
	if isErr || !strings.Contains(out, "memory 256.0 MiB") || !strings.Contains(out, "5m0s per command") {
		t.Fatalf("a session naming no preset = %q, want the default preset within the ceiling", out)
	}
	out, isErr = callText(t, cs, "sandbox_create", map[string]any{"preset": "small", "timeout_seconds": 5})
	if isErr || !strings.Contains(out, "memory 64.0 MiB") || !strings.Contains(out, "5s per command") {
		t.Fatalf("preset small asking 5s = %q", out)
	}
	if out, isErr = callText(t, cs, "sandbox_create", map[string]any{"preset": "small", "memory": "128M"}); !isErr || !strings.Contains(out, "above the operator's ceiling") {
		t.Fatalf("more than the preset = %q", out)
	}
	if out, isErr = callText(t, cs, "sandbox_create", map[string]any{"preset": "huge"}); !isErr || !strings.Contains(out, `no preset "huge" (the operator defines: default, small)`) {
		t.Fatalf("an unknown preset = %q", out)
	}
}

func TestAMatchingCallRunsOnlyWhenTheUserApproves(t *testing.T) {
	for _, tt := range []struct {
		answer, want string
		isErr        bool
	}{
		{"accept", "exit code: 0", false},
		{"decline", "the user did not approve this call (operator's rule exec ~ rm\\s+-rf); it was not run", true},
		{"", "this client cannot ask its user (no elicitation); it was not run", true},
	} {
		t.Run("answer "+tt.answer, func(t *testing.T) {
			cs := connectWith(t, tt.answer)
			if out, isErr := callText(t, cs, "exec", map[string]any{"cmd": "echo no rule matches"}); isErr {
				t.Fatalf("a call no rule matches: %q", out)
			}
			out, isErr := callText(t, cs, "exec", map[string]any{"cmd": "mkdir -p d && rm -rf d"})
			if isErr != tt.isErr || !strings.Contains(out, tt.want) {
				t.Fatalf("exec rm -rf = %q (error %v), want %q", out, isErr, tt.want)
			}
		})
	}
}
