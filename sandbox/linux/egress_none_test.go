//go:build noegress

package linux

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/agentbox/agentbox/sandbox"
)

// Without the proxy, an allow-list is refused up front, with nothing
// started: it must never run with more network (host) or silently less
// (none) than asked.
func TestWithoutTheProxyAnAllowListIsRefusedBeforeAnythingStarts(t *testing.T) {
	c := newTestClient(t)
	if hasPart(c, sandbox.PartNetworkAllowList) {
		t.Fatalf("a noegress build claims to enforce %s", sandbox.PartNetworkAllowList)
	}
	before, _ := os.ReadDir(c.opts.StateDir)
	_, err := c.Create(context.Background(), sandbox.Spec{Policy: sandbox.Policy{
		Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkAllowList, Allow: []string{"api.example.com"}},
	}})
	if !errors.Is(err, sandbox.ErrPolicyUnsupported) {
		t.Fatalf("Create with an allow-list: %v, want ErrPolicyUnsupported", err)
	}
	if after, _ := os.ReadDir(c.opts.StateDir); len(after) != len(before) {
		t.Errorf("the refused Create left %d entries in %s (had %d)", len(after), c.opts.StateDir, len(before))
	}
}
