package mcp

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A model can start a sandbox from a manifest of its own: files and
// directories it writes, never host files or grants.
func TestASandboxStartsFromTheModelsManifestAndNoHostFile(t *testing.T) {
	cs, _, _ := connect(t, Options{})
	out, isErr := callText(t, cs, "sandbox_create", map[string]any{"manifest": map[string]any{
		"entries": map[string]any{
			"task.md": map[string]any{"file": map[string]any{"content": "reconcile january\n"}},
			"out":     map[string]any{"dir": map[string]any{}},
		},
		"env": map[string]any{"CLIENT": "acme"},
	}})
	if isErr {
		t.Fatalf("sandbox_create with a manifest: %s", out)
	}
	id := strings.TrimPrefix(strings.SplitN(out, "\n", 2)[0], "session_id: ")
	out, isErr = callText(t, cs, "exec", map[string]any{"session_id": id, "cmd": `cat task.md; echo "$CLIENT"; test -d out && echo has out; pwd`})
	if isErr || !strings.Contains(out, "reconcile january\nacme\nhas out\n") {
		t.Fatalf("the sandbox made from the manifest sees %q", out)
	}
	ws := strings.TrimSpace(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:])
	if out, isErr := callText(t, cs, "sandbox_close", map[string]any{"session_id": id}); isErr {
		t.Fatal(out)
	}
	// The local backend runs in the host directory itself.
	if !filepath.IsAbs(ws) || !strings.Contains(ws, "agentbox-mcp-ws-") {
		t.Fatalf("pwd in the sandbox = %q, want the manifest's temporary workspace", ws)
	}
	if _, err := os.Stat(ws); !os.IsNotExist(err) {
		t.Errorf("the manifest's workspace %s outlived sandbox_close: %v", ws, err)
	}

	for _, tc := range []struct {
		name     string
		manifest map[string]any
		want     string
	}{
		{"a host file", map[string]any{"entries": map[string]any{"passwd": map[string]any{"local_file": map[string]any{"src": "/etc/passwd"}}}}, "/etc/passwd"},
		{"a host mount", map[string]any{"entries": map[string]any{"root": map[string]any{"mount": map[string]any{"src": "/root"}}}}, "/root"},
		{"a grant", map[string]any{"entries": map[string]any{"x": map[string]any{"file": map[string]any{"content": "x"}}}, "grants": []any{map[string]any{"path": "/etc", "read_only": true}}}, "grant"},
		{"an unknown key", map[string]any{"entires": map[string]any{}}, "entires"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, isErr := callText(t, cs, "sandbox_create", map[string]any{"manifest": tc.manifest})
			if !isErr || !strings.Contains(out, tc.want) {
				t.Fatalf("sandbox_create with %s = %q (error %v), want a tool error naming %q", tc.name, out, isErr, tc.want)
			}
		})
	}
	if out, _ := callText(t, cs, "sandbox_list", nil); !strings.HasPrefix(out, "no sandboxes") {
		t.Fatalf("refused manifests left sandboxes: %q", out)
	}
}
