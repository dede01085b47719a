package remote

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/agentbox/agentbox/sandbox"
)

// A spec with credentials is refused before anything is sent: Secrets are
// never serialized, so sending it would silently drop them.
func TestCreateRefusesCredentialsItCouldNotSend(t *testing.T) {
	sent := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/backend" {
			_, _ = w.Write([]byte(`{"name":"linux","enforces":["network.allowlist"]}`))
			return
		}
		sent++
		http.Error(w, "unexpected", http.StatusTeapot)
	}))
	defer srv.Close()
	c, err := New(context.Background(), Options{Server: srv.URL, Token: "abx_test_x"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Create(context.Background(), sandbox.Spec{Policy: sandbox.Policy{Network: sandbox.NetworkPolicy{
		Mode: sandbox.NetworkAllowList, Allow: []string{"api.example.com"},
		Secrets: []sandbox.Credential{{Host: "api.example.com", Kind: sandbox.CredBearer, Source: "env:X"}},
	}}})
	if !errors.Is(err, sandbox.ErrPolicyUnsupported) || sent != 0 {
		t.Errorf("Create = %v after %d requests, want ErrPolicyUnsupported and none sent", err, sent)
	}
}
