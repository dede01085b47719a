package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/sandbox"
)

func TestThePromptTellsTheModelTheSessionsPolicy(t *testing.T) {
	tests := []struct {
		name    string
		policy  sandbox.Policy
		want    []string
		notWant []string
	}{
		{"an allow-list is named, not called unavailable",
			sandbox.Policy{Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkAllowList, Allow: []string{"pypi.org", "files.pythonhosted.org"}}},
			[]string{"The network reaches only these hosts: pypi.org, files.pythonhosted.org", "HTTPS_PROXY"},
			[]string{"no network", "unavailable"}},
		{"no network is said to be none",
			sandbox.Policy{},
			[]string{"There is no network"}, []string{"reaches only"}},
		{"the limits set are named",
			sandbox.Policy{Resources: sandbox.Resources{ExecTimeout: time.Second, MemoryBytes: 256 << 20, Pids: 64, OutputBytes: 4096}},
			[]string{"each command is killed after 1s", "memory is capped at 256", "at most 64 processes", "output is cut at 4"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := plan("ok")
			if _, err := (&Runner{}).Run(context.Background(), &SandboxAgent{Model: m}, "go", RunConfig{Sandbox: SandboxConfig{Client: newClient(t), Spec: sandbox.Spec{Policy: tt.policy}}}); err != nil {
				t.Fatal(err)
			}
			ins := m.requests()[0].Instructions
			for _, w := range tt.want {
				if !strings.Contains(ins, w) {
					t.Errorf("the prompt lacks %q:\n%s", w, ins)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(ins, w) {
					t.Errorf("the prompt says %q:\n%s", w, ins)
				}
			}
		})
	}
}

// mountedSession reports mounts and a filesystem policy in its state, as
// a native session with a manifest's read-only inputs does.
type mountedSession struct {
	sandbox.Session
	mounts []sandbox.Mount
	fs     sandbox.FilesystemPolicy
}

func (s mountedSession) State() sandbox.State {
	st := s.Session.State()
	st.Spec.Mounts = s.mounts
	st.Spec.Policy.Filesystem = s.fs
	return st
}

func TestTheWorkspaceTreeMarksMountsAndProtectedPaths(t *testing.T) {
	sess := liveSession(t)
	ws := sess.State().Workspace
	for _, d := range []string{"statements", "output", "inputs", "secret"} {
		if err := os.Mkdir(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ws, "statements", "bank.csv"), []byte("a,b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ms := mountedSession{Session: sess,
		mounts: []sandbox.Mount{{Source: "/srv/client", Target: "/workspace/statements", ReadOnly: true}, {Source: "/srv/out", Target: "/workspace/output/"}},
		fs:     sandbox.FilesystemPolicy{ReadOnly: []string{"/workspace/inputs"}, Deny: []string{"/workspace/secret"}},
	}
	tree, err := RenderTree(context.Background(), ms, "/workspace", TreeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"statements/  (read-only mount)", "output/  (read-write mount)", "inputs/  (read-only)", "secret/  (denied: neither readable nor writable)", "bank.csv (4 B)\n"} {
		if !strings.Contains(tree+"\n", w) {
			t.Errorf("the tree lacks %q:\n%s", w, tree)
		}
	}
}

func TestTheModelIsToldWhatTheProxyAddsAndAdmits(t *testing.T) {
	network, _ := SandboxFacts(sandbox.Policy{Network: sandbox.NetworkPolicy{
		Mode: sandbox.NetworkAllowList, Allow: []string{"api.openai.com", "api.github.com"},
		Rules: []sandbox.RequestRule{{Host: "api.github.com", Methods: []string{"GET"}, Paths: []string{"/repos/acme/**"}}},
		Secrets: []sandbox.Credential{
			{Host: "api.openai.com", Kind: sandbox.CredPlaceholder, Name: "OPENAI_API_KEY", Source: "env:SECRET_SOURCE"},
			{Host: "api.github.com", Kind: sandbox.CredBearer, Source: "file:/run/secret-source"},
		},
	}})
	for _, want := range []string{"$OPENAI_API_KEY (for api.openai.com)", "adds the credentials for api.github.com", "GET api.github.com/repos/acme/**"} {
		if !strings.Contains(network, want) {
			t.Errorf("network facts %q lack %q", network, want)
		}
	}
	if strings.Contains(network, "SECRET_SOURCE") || strings.Contains(network, "secret-source") {
		t.Errorf("the model is told where a secret comes from: %q", network)
	}
}
