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
redact: ['ACME-[0-9]{8}']
caches: [go, pip]
mcp_servers:
  - {name: fx, command: [python3, fx_server.py], env: {FX_DATE: "2026-03-31"}}
  - {name: crm, url: "http://127.0.0.1:8931/mcp"}
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
	if len(a.Capabilities) != 4 {
		t.Fatalf("%d capabilities, want the three listed and the MCP servers", len(a.Capabilities))
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
	if strings.Join(f.Caches, ",") != "go,pip" {
		t.Errorf("caches %q", f.Caches)
	}
	if f.Artifacts.Rules != filepath.Join(dir, "rules.yaml") || f.Artifacts.To != filepath.Join(dir, "out") {
		t.Errorf("artifacts %+v", f.Artifacts)
	}
	if len(f.Redact) != 1 || f.Redact[0] != "ACME-[0-9]{8}" {
		t.Errorf("redact %q", f.Redact)
	}
	if m, ok := a.Capabilities[3].(*MCPServers); !ok || len(m.Servers) != 2 || m.Servers[0].Dir != dir || m.Servers[0].Env["FX_DATE"] != "2026-03-31" || m.Servers[1].URL == "" {
		t.Errorf("mcp servers %+v", a.Capabilities[3])
	}
}

func TestLoadFileRejectsBadFiles(t *testing.T) {
	tests := []struct {
		name, yaml, wantErr string
	}{
		{"an unknown key, with the nearest known one", "name: a\nmodle: {}\n", `agent file: line 2: unknown key modle; did you mean model?`},
		{"an unknown nested key, by its path", "name: a\npolicy:\n  timout: 1s\n", `agent file: line 3: unknown key policy.timout; did you mean timeout?`},
		{"an unknown key with nothing near, listing the known ones", "name: a\nmodel: {flavour: x}\n", `unknown key model.flavour (known here: provider, name, base_url, plan)`},
		{"a missing name", "instructions: hi\n", "name is required"},
		{"an unknown capability", "name: a\ncapabilities: [browser]\n", "capability browser: unknown capability"},
		{"an unknown capability option", "name: a\ncapabilities:\n  - shell: {timeot: 3s}\n", `capability shell: line 3: unknown option "timeot"; did you mean "timeout"? (known: timeout, max_timeout, max_processes)`},
		{"a capability listed twice", "name: a\ncapabilities: [shell, shell]\n", "listed twice"},
		{"an unknown provider", "name: a\nmodel: {provider: claude}\n", `model.provider "claude" is not one of`},
		{"a misspelt provider", "name: a\nmodel:\n  provider: openai-chta\n", `line 3: model.provider "openai-chta" is not one of openai-responses, openai-chat, scripted; did you mean "openai-chat"?`},
		{"an unknown tool cache", "name: a\ncaches: [go, pipp]\n", `line 2: caches: "pipp" is not one of go, npm, pip; did you mean "pip"?`},
		{"a misspelt capability", "name: a\ncapabilities: [shel]\n", `capability shel: unknown capability; did you mean "shell"?`},
		{"a bad duration", "name: a\npolicy: {timeout: soon}\n", `policy.timeout: "soon" is not a duration`},
		{"a bad size", "name: a\npolicy: {memory: lots}\n", "policy.memory"},
		{"a bad network", "name: a\npolicy: {network: everywhere}\n", "policy.network is none, host, or a list"},
		{"a bad approval regexp", "name: a\napprovals: [{tool: exec_command, match: '('}]\n", "approvals[0].match"},
		{"a bad redaction pattern", "name: a\nredact: ['[']\n", "redact[0]"},
		{"an MCP server with both a command and a url", "name: a\nmcp_servers: [{name: x, command: [y], url: 'http://z'}]\n", "mcp_servers[0] (x) needs a command"},
		{"an MCP server with a name the model's API refuses", "name: a\nmcp_servers: [{name: 'a.b', url: 'http://z'}]\n", `mcp_servers[0].name "a.b"`},
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

func TestLoadFileReportsEveryProblemAtOnce(t *testing.T) {
	const file = `instrucions: hi
model: {provider: scripted}
capabilities: [shel]
policy:
  timeout: soon
  memory: lots
approvals: [{}]
`
	_, err := ParseFile([]byte(file), t.TempDir())
	if err == nil {
		t.Fatal("a file with six problems loaded")
	}
	want := []string{
		"agent file: line 1: unknown key instrucions; did you mean instructions?",
		"agent file: name is required",
		`agent file: line 3: capability shel: unknown capability; did you mean "shell"?`,
		"agent file: line 6: policy.memory: ",
		`agent file: line 5: policy.timeout: "soon" is not a duration`,
		`agent file: line 7: approvals[0] needs a tool or a match`,
	}
	lines := strings.Split(err.Error(), "\n")
	for _, w := range want {
		found := false
		for _, l := range lines {
			found = found || strings.HasPrefix(l, w)
		}
		if !found {
			t.Errorf("no line starts with %q in:\n%v", w, err)
		}
	}
	if len(lines) != len(want) {
		t.Errorf("%d lines, want one per problem (%d):\n%v", len(lines), len(want), err)
	}
}

func TestTheNetworkMappingCarriesRulesAndCredentials(t *testing.T) {
	f, err := ParseFile([]byte(`name: a
policy:
  network:
    allow: [api.github.com, api.openai.com]
    inspect: [api.github.com]
    rules: ["GET,HEAD api.github.com/repos/acme/**"]
    credentials: ["api.openai.com=placeholder:OPENAI_API_KEY:env:OPENAI_API_KEY"]
`), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	n := f.Policy.Network
	if n.Mode != sandbox.NetworkAllowList || len(n.Allow) != 2 || len(n.Inspect) != 1 || len(n.Rules) != 1 ||
		len(n.Secrets) != 1 || n.Secrets[0].Name != "OPENAI_API_KEY" {
		t.Errorf("network = %+v", n)
	}
	for name, bad := range map[string]string{
		"an unknown key":                 "    allow: [a.com]\n    rulez: []\n",
		"a rule for an unlisted host":    "    allow: [a.com]\n    rules: ['GET b.com']\n",
		"a credential with a bad source": "    allow: [a.com]\n    credentials: ['a.com=bearer:value:x']\n",
		"no allow-list":                  "    inspect: [a.com]\n",
	} {
		if _, err := ParseFile([]byte("name: a\npolicy:\n  network:\n"+bad), t.TempDir()); err == nil {
			t.Errorf("%s: accepted", name)
		} else if strings.Contains(err.Error(), "value:x") {
			t.Errorf("%s: the error %q echoes the source", name, err)
		}
	}
}
