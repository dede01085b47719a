package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/sandbox"
)

const fullAgentFile = `name: reconcile
instructions: |
  Reconcile the statements.
manifest:
  entries:
    output:
      dir: {}
    README.md:
      file: {content: "hello"}
capabilities:
  - filesystem
  - shell: {timeout: 45s, max_processes: 3}
  - compaction: {max_tokens: 5000, keep_last: 2}
model:
  provider: scripted
  plan: plan.yaml
settings: {temperature: 0.2, max_output_tokens: 900, store: true}
max_turns: 7
run_as: "1000:1000"
policy:
  network: [pypi.org]
  memory: 512M
  pids: 128
  cpus: 1.5
  timeout: 30s
approvals:
  - tool: exec_command
    match: "rm -rf"
artifacts:
  rules: rules.yaml
  to: out
`

func TestLoadFileReadsEveryKey(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "agent.yaml")
	if err := os.WriteFile(path, []byte(fullAgentFile), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	a := f.Agent
	if a.Name != "reconcile" || a.MaxTurns != 7 || a.RunAs != "1000:1000" || !strings.Contains(a.Instructions, "Reconcile") {
		t.Errorf("agent %+v", a)
	}
	if a.Manifest == nil || len(a.Manifest.Entries) != 2 {
		t.Errorf("inline manifest not loaded: %+v", a.Manifest)
	}
	if f.ManifestBase != dir {
		t.Errorf("inline manifest base %q, want the agent file's directory", f.ManifestBase)
	}
	if len(a.Capabilities) != 3 {
		t.Fatalf("%d capabilities, want 3", len(a.Capabilities))
	}
	if sh := a.Capabilities[1].(*Shell); sh.Timeout != 45*time.Second || sh.MaxProcesses != 3 {
		t.Errorf("shell options %+v", sh)
	}
	if c := a.Capabilities[2].(*Compaction); c.MaxTokens != 5000 || c.KeepLast != 2 {
		t.Errorf("compaction options %+v", c)
	}
	if f.Model.Provider != "scripted" || f.Model.Plan != filepath.Join(dir, "plan.yaml") {
		t.Errorf("model %+v", f.Model)
	}
	if a.Settings.Temperature == nil || *a.Settings.Temperature != 0.2 || a.Settings.MaxOutputTokens != 900 || !a.Settings.Stores() {
		t.Errorf("settings %+v", a.Settings)
	}
	p := f.Policy
	if p.Network.Mode != sandbox.NetworkAllowList || p.Network.Allow[0] != "pypi.org" || p.Resources.MemoryBytes != 512<<20 ||
		p.Resources.Pids != 128 || p.Resources.CPUs != 1.5 || p.Resources.ExecTimeout != 30*time.Second {
		t.Errorf("policy %+v", p)
	}
	if len(f.Approvals) != 1 || !f.Approvals[0].Match.MatchString("rm -rf /") {
		t.Errorf("approvals %+v", f.Approvals)
	}
	if f.Artifacts.Rules != filepath.Join(dir, "rules.yaml") || f.Artifacts.To != filepath.Join(dir, "out") {
		t.Errorf("artifacts %+v", f.Artifacts)
	}
}

func TestLoadFileRejectsBadFiles(t *testing.T) {
	tests := []struct {
		name, yaml, wantErr string
	}{
		{"an unknown key", "name: a\nmodle: {}\n", `field modle not found`},
		{"a missing name", "instructions: hi\n", "name is required"},
		{"an unknown capability", "name: a\ncapabilities: [browser]\n", "capability browser: unknown capability"},
		{"an unknown capability option", "name: a\ncapabilities:\n  - shell: {timeot: 3s}\n", `capability shell: line 3: unknown option "timeot" (known: timeout, max_timeout, max_processes)`},
		{"a capability listed twice", "name: a\ncapabilities: [shell, shell]\n", "listed twice"},
		{"an unknown provider", "name: a\nmodel: {provider: claude}\n", `model.provider "claude" is not one of`},
		{"a bad duration", "name: a\npolicy: {timeout: soon}\n", `policy.timeout: "soon" is not a duration`},
		{"a bad size", "name: a\npolicy: {memory: lots}\n", "policy.memory"},
		{"a bad network", "name: a\npolicy: {network: everywhere}\n", "policy.network is none, host, or a list"},
		{"a bad approval regexp", "name: a\napprovals: [{tool: exec_command, match: '('}]\n", "approvals[0].match"},
		{"an empty file", "", "agent file is empty"},
		{"artifacts without rules", "name: a\nartifacts: {to: out}\n", "artifacts.to needs artifacts.rules"},
		{"an inline manifest with an unknown key", "name: a\nmanifest: {entriez: {}}\n", "inline manifest at line 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name+" is refused", func(t *testing.T) {
			_, err := ParseFile([]byte(tt.yaml), t.TempDir())
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want %q", err, tt.wantErr)
			}
		})
	}
}
