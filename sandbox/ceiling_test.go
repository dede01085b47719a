package sandbox

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestBound(t *testing.T) {
	ceiling := Policy{
		Network: NetworkPolicy{Mode: NetworkAllowList, Allow: []string{"pypi.org", "*.example.com"},
			Credentials: map[string]map[string]string{"pypi.org": {"Authorization": "secret"}}},
		Filesystem: FilesystemPolicy{ReadOnly: []string{"/workspace/in"}},
		Resources:  Resources{MemoryBytes: 1 << 30, Pids: 100, ExecTimeout: time.Minute, IdleTimeout: time.Hour},
	}
	tests := []struct {
		name    string
		asked   Policy
		check   func(t *testing.T, p Policy)
		refused string
	}{
		{name: "nothing asked gives the ceiling", check: func(t *testing.T, p Policy) {
			if p.Resources != ceiling.Resources || !slices.Equal(p.Network.Allow, ceiling.Network.Allow) {
				t.Errorf("got %+v, want the ceiling", p)
			}
		}},
		{name: "lower limits are kept", asked: Policy{Resources: Resources{MemoryBytes: 64 << 20, ExecTimeout: time.Second, CPUs: 0.5}},
			check: func(t *testing.T, p Policy) {
				if p.Resources.MemoryBytes != 64<<20 || p.Resources.ExecTimeout != time.Second || p.Resources.Pids != 100 || p.Resources.CPUs != 0.5 {
					t.Errorf("resources %+v", p.Resources)
				}
			}},
		{name: "a limit above the ceiling is refused by name", asked: Policy{Resources: Resources{MemoryBytes: 2 << 30}}, refused: "memory 2147483648 bytes is above the operator's ceiling of 1073741824 bytes"},
		{name: "a longer timeout is refused", asked: Policy{Resources: Resources{ExecTimeout: time.Hour}}, refused: "exec timeout 1h0m0s is above"},
		{name: "a longer idle timeout is refused", asked: Policy{Resources: Resources{IdleTimeout: 2 * time.Hour}}, refused: "idle timeout 2h0m0s is above"},
		{name: "no network may be asked", asked: Policy{Network: NetworkPolicy{Mode: NetworkNone}}, check: func(t *testing.T, p Policy) {
			if p.Network.EffectiveMode() != NetworkNone || p.Network.Credentials != nil {
				t.Errorf("network %+v", p.Network)
			}
		}},
		{name: "a covered host keeps its credentials", asked: Policy{Network: NetworkPolicy{Mode: NetworkAllowList, Allow: []string{"pypi.org", "api.example.com"}}},
			check: func(t *testing.T, p Policy) {
				if len(p.Network.Allow) != 2 || p.Network.Credentials["pypi.org"]["Authorization"] != "secret" {
					t.Errorf("network %+v", p.Network)
				}
			}},
		{name: "a host outside the allow-list is refused", asked: Policy{Network: NetworkPolicy{Mode: NetworkAllowList, Allow: []string{"evil.com"}}}, refused: "network host evil.com is above"},
		{name: "the wildcard's own domain is not under it", asked: Policy{Network: NetworkPolicy{Mode: NetworkAllowList, Allow: []string{"example.com"}}}, refused: "example.com"},
		{name: "host networking is refused", asked: Policy{Network: NetworkPolicy{Mode: NetworkHost}}, refused: "network host is above"},
		{name: "read-only paths only add", asked: Policy{Filesystem: FilesystemPolicy{ReadOnly: []string{"/workspace/more"}}}, check: func(t *testing.T, p Policy) {
			if !slices.Equal(p.Filesystem.ReadOnly, []string{"/workspace/in", "/workspace/more"}) {
				t.Errorf("read-only %v", p.Filesystem.ReadOnly)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Bound(ceiling, tt.asked)
			if tt.refused != "" {
				if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.refused) {
					t.Fatalf("err = %v, want ErrInvalid with %q", err, tt.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, p)
		})
	}
}

func TestBoundWithoutCeilingLimits(t *testing.T) {
	p, err := Bound(Policy{Network: NetworkPolicy{Mode: NetworkNone}}, Policy{Resources: Resources{MemoryBytes: 8 << 30}, Network: NetworkPolicy{Mode: NetworkAllowList, Allow: []string{"a.com"}}})
	if err == nil || !strings.Contains(err.Error(), "no network") {
		t.Fatalf("an allow-list under a no-network ceiling: err = %v, p = %+v", err, p)
	}
	p, err = Bound(Policy{}, Policy{Resources: Resources{MemoryBytes: 8 << 30}})
	if err != nil || p.Resources.MemoryBytes != 8<<30 {
		t.Fatalf("a ceiling with no memory limit takes what is asked: %+v, %v", p.Resources, err)
	}
}
