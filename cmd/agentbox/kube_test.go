package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The kube backend's paths that need no cluster: a kubeconfig that is not
// there and a cluster that does not answer each fail at once with a line
// that names what to fix (kube_cluster_test.go, -tags kube, has the rest).
func TestKubeWithoutAClusterFailsSayingWhy(t *testing.T) {
	dir := t.TempDir()
	dead := filepath.Join(dir, "dead.kubeconfig")
	// A port that refuses: nothing listens on port 1 of the loopback.
	if err := os.WriteFile(dead, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.kubeconfig")
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"a kubeconfig path that is not there", []string{"exec", "--backend", "kube", "--kubeconfig", missing, "--", "true"},
			[]string{"kubeconfig " + missing, "no such file"}},
		{"a cluster that does not answer", []string{"exec", "--backend", "kube", "--kubeconfig", dead, "--", "true"},
			[]string{"API server https://127.0.0.1:1", "does not answer", "connection refused"}},
		{"no kubeconfig at all", []string{"exec", "--backend", "kube", "--", "true"},
			[]string{"kubeconfig from $KUBECONFIG or ~/.kube/config"}},
		{"run on a cluster that does not answer", []string{"run", "--backend", "kube", "--kubeconfig", dead, "--agent", filepath.Join(agentDir(t, "x", false), "agent.yaml"), "task"},
			[]string{"API server https://127.0.0.1:1", "does not answer"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := runEnv(t, append(os.Environ(), "HOME="+dir, "KUBECONFIG="), tc.args...)
			if cmd.code != 125 {
				t.Fatalf("exit %d, want 125\nstdout: %s\nstderr: %s", cmd.code, cmd.stdout, cmd.stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(cmd.stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, cmd.stderr)
				}
			}
		})
	}
	t.Run("gc on a named cluster that does not answer fails, naming it", func(t *testing.T) {
		r := runEnv(t, append(os.Environ(), "HOME="+dir, "KUBECONFIG="), "gc", "--dry-run", "--kubeconfig", dead, "--namespace", "agents")
		if r.code != 125 || !strings.Contains(r.stderr, "kube:") || !strings.Contains(r.stderr, "API server https://127.0.0.1:1") || !strings.Contains(r.stderr, "does not answer") {
			t.Fatalf("exit %d, want 125 naming the cluster\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("gc with no kubeconfig at all skips kube, saying why", func(t *testing.T) {
		r := runEnv(t, append(os.Environ(), "HOME="+dir, "KUBECONFIG="), "gc", "--dry-run")
		if !strings.Contains(r.stderr, "gc: kube: skipped:") || !strings.Contains(r.stderr, "kubeconfig from $KUBECONFIG or ~/.kube/config") {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("gc --help teaches the cluster flags", func(t *testing.T) {
		r := runEnv(t, os.Environ(), "gc", "--help")
		for _, w := range []string{"--kubeconfig FILE", "--namespace NAME", "kube Pods"} {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("gc --help lacks %q:\n%s", w, r.stdout)
			}
		}
	})
	t.Run("agentbox backends says kube is unavailable and why", func(t *testing.T) {
		r := runEnv(t, os.Environ(), "backends", "--kubeconfig", dead)
		if r.code != 0 || !strings.Contains(r.stdout, "kube: unavailable:") || !strings.Contains(r.stdout, "does not answer") {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
	})
}

type cliResult struct {
	stdout, stderr string
	code           int
}

// runEnv runs agentbox with args in env (later entries win).
func runEnv(t *testing.T, env []string, args ...string) cliResult {
	t.Helper()
	cmd := exec.Command(agentboxBinary(t), args...)
	cmd.Env = env
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	r := cliResult{stdout: o.String(), stderr: e.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return r
}
