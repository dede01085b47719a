package main

import (
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestARunCallsAnAPIWithAKeyItNeverHolds runs an agent whose file gives
// an HTTPS host a credential: the model's command reaches the host, the
// host gets the key, and neither the command's output, the trace nor the
// CLI's output holds it. The upstream is a loopback IP literal, listed
// explicitly; agentbox trusts its certificate through SSL_CERT_FILE.
func TestARunCallsAnAPIWithAKeyItNeverHolds(t *testing.T) {
	linuxBackend(t)
	const secret = "sk-live-" + "run-4be1"
	var mu sync.Mutex
	var auth []string
	up := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		fmt.Fprintf(w, "hello %s\n", r.URL.Path)
	}))
	defer up.Close()
	dir := t.TempDir()
	certFile := filepath.Join(dir, "upstream.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: up.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SSL_CERT_FILE", certFile) // the proxy's roots for the upstream
	t.Setenv("AGENTBOX_TEST_RUN_SECRET", secret)
	host := up.Listener.Addr().String()
	files := map[string]string{
		"agent.yaml": fmt.Sprintf(`name: caller
model: {provider: scripted, plan: plan.yaml}
policy:
  network:
    allow: ["%[1]s"]
    rules: ["GET %[1]s/v1/**"]
    credentials: ["%[1]s=bearer:env:AGENTBOX_TEST_RUN_SECRET"]
`, host),
		"plan.yaml": fmt.Sprintf(`steps:
  - call: {tool: exec_command, arguments: {cmd: "curl -sS --noproxy '' https://%[1]s/v1/models; env | grep -c sk-liv[e] || true"}}
    expect: {output_contains: "hello /v1/models", exit_code: 0}
  - final: "{{output:1}}"
`, host),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	trace := filepath.Join(dir, "t.jsonl")
	stdout, stderr, code := runCLI(t, "run", "--agent", filepath.Join(dir, "agent.yaml"), "--trace", trace, "call the API")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	mu.Lock()
	got := strings.Join(auth, ",")
	mu.Unlock()
	if got != "Bearer "+secret {
		t.Errorf("the upstream saw Authorization %q", got)
	}
	tr, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	for what, text := range map[string]string{"the trace": string(tr), "stdout": stdout, "stderr": stderr} {
		if strings.Contains(text, secret) || strings.Contains(text, "AGENTBOX_TEST_RUN_SECRET") {
			t.Errorf("%s holds the secret or its source:\n%s", what, text)
		}
	}
	if !strings.Contains(string(tr), "hello /v1/models") {
		t.Errorf("the trace does not show the call's output:\n%s", tr)
	}
}
