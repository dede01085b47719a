package sandboxtest

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/sandbox"
)

func policyTests() []testCase {
	return []testCase{
		{name: "the backend names only known policy parts", run: testEnforcesKnownParts},
		{name: "a policy part the backend does not enforce is refused by name", run: testRefusesUnenforcedParts},
	}
}

func testEnforcesKnownParts(t *testing.T, s *suite) {
	c := s.client(t)
	for _, p := range c.Enforces() {
		if !slices.Contains(sandbox.AllParts, p) {
			t.Errorf("Enforces() lists unknown part %q", p)
		}
	}
}

// requestable are the parts a Policy can ask for, each with a policy that
// asks for it.
var requestable = []struct {
	part sandbox.Part
	set  func(*sandbox.Policy)
}{
	{sandbox.PartMemory, func(p *sandbox.Policy) { p.Resources.MemoryBytes = 256 << 20 }},
	{sandbox.PartPids, func(p *sandbox.Policy) { p.Resources.Pids = 64 }},
	{sandbox.PartCPU, func(p *sandbox.Policy) { p.Resources.CPUs = 1 }},
	{sandbox.PartDisk, func(p *sandbox.Policy) { p.Resources.DiskBytes = 64 << 20 }},
	{sandbox.PartTimeout, func(p *sandbox.Policy) { p.Resources.ExecTimeout = time.Minute }},
	{sandbox.PartIdleTimeout, func(p *sandbox.Policy) { p.Resources.IdleTimeout = time.Hour }},
	{sandbox.PartReadOnlyPaths, func(p *sandbox.Policy) { p.Filesystem.ReadOnly = []string{sandbox.DefaultWorkdir + "/in"} }},
	{sandbox.PartDenyPaths, func(p *sandbox.Policy) { p.Filesystem.Deny = []string{sandbox.DefaultWorkdir + "/secret"} }},
	{sandbox.PartNetworkAllowList, func(p *sandbox.Policy) {
		p.Network = sandbox.NetworkPolicy{Mode: sandbox.NetworkAllowList, Allow: []string{"example.com"}}
	}},
	{sandbox.PartNetworkInspect, func(p *sandbox.Policy) {
		p.Network = sandbox.NetworkPolicy{Mode: sandbox.NetworkAllowList, Allow: []string{"example.com"}, Inspect: []string{"example.com"}}
	}},
}

func testRefusesUnenforcedParts(t *testing.T, s *suite) {
	c := s.client(t)
	enforces := c.Enforces()
	tried := 0
	for _, r := range requestable {
		if slices.Contains(enforces, r.part) {
			continue
		}
		tried++
		t.Run(string(r.part)+" is refused without allow-weaker and runs with it", func(t *testing.T) {
			spec := s.spec(t, func(sp *sandbox.Spec) {
				r.set(&sp.Policy)
				sp.AllowWeaker = false
			})
			sess, err := c.Create(ctx(t), spec)
			if err == nil {
				closeAtEnd(t, sess)
				t.Fatalf("Create accepted a policy asking for %s, which Enforces() does not list", r.part)
			}
			if !errors.Is(err, sandbox.ErrPolicyUnsupported) || !strings.Contains(err.Error(), string(r.part)) {
				t.Fatalf("err = %v, want ErrPolicyUnsupported naming %s", err, r.part)
			}
			// With allow-weaker the same spec runs (the weakening is the
			// backend's to log).
			spec.AllowWeaker = true
			sess, err = c.Create(ctx(t), spec)
			if err != nil {
				t.Fatalf("with allow-weaker: %v", err)
			}
			closeAtEnd(t, sess)
			shOK(t, sess, "true")
		})
	}
	if tried == 0 {
		t.Log("the backend enforces every requestable part on this host: nothing to refuse")
	}
}
