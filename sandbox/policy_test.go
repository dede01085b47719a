package sandbox

import (
	"bytes"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestPolicyValidate(t *testing.T) {
	allow := func(hosts ...string) Policy {
		return Policy{Network: NetworkPolicy{Mode: NetworkAllowList, Allow: hosts}}
	}
	res := func(r Resources) Policy { return Policy{Resources: r} }
	tests := []struct {
		name    string
		p       Policy
		wantErr string // substring of the error; "" means valid
	}{
		{"the zero policy is valid", Policy{}, ""},
		{"network none with an allow-list conflicts", Policy{Network: NetworkPolicy{Mode: NetworkNone, Allow: []string{"a.com"}}}, "choose one"},
		{"the default mode with an allow-list conflicts", Policy{Network: NetworkPolicy{Allow: []string{"a.com"}}}, "choose one"},
		{"host network with an allow-list conflicts", Policy{Network: NetworkPolicy{Mode: NetworkHost, Allow: []string{"a.com"}}}, "choose one"},
		{"an empty allow-list is refused", allow(), "empty"},
		{"an unknown network mode is refused", Policy{Network: NetworkPolicy{Mode: "bridge"}}, "unknown network mode"},
		{"plain, wildcard and port hosts are valid", allow("example.com", "*.example.com", "api.example.com:443", "localhost", "a-b.c0.io"), ""},
		{"an empty host is refused", allow(""), "not a host name"},
		{"a label starting with a dash is refused", allow("-bad.com"), "not a host name"},
		{"a label ending with a dash is refused", allow("bad-.com"), "not a host name"},
		{"an empty label is refused", allow("a..b"), "not a host name"},
		{"a space is refused", allow("ex ample.com"), "not a host name"},
		{"a URL is refused with the host name to give", allow("https://example.com/simple"), `allow-list entry "https://example.com/simple" is a URL; give the host name alone (example.com), without https:// or a path`},
		{"a bare wildcard is refused", allow("*."), "not a host name"},
		{"a non-ASCII host is refused", allow("héllo.com"), "not a host name"},
		{"a 64-character label is refused", allow(strings.Repeat("a", 64) + ".com"), "not a host name"},
		{"an empty port is refused", allow("example.com:"), "bad port"},
		{"a non-numeric port is refused", allow("example.com:http"), "bad port"},
		{"a six-digit port is refused", allow("example.com:443443"), "bad port"},
		{"negative memory is refused", res(Resources{MemoryBytes: -1}), "memory limit is negative"},
		{"negative pids are refused", res(Resources{Pids: -1}), "pids limit is negative"},
		{"a negative disk quota is refused", res(Resources{DiskBytes: -1}), "disk limit is negative"},
		{"a negative output cap is refused", res(Resources{OutputBytes: -1}), "output limit is negative"},
		{"a negative exec timeout is refused", res(Resources{ExecTimeout: -time.Second}), "exec timeout limit is negative"},
		{"a negative session timeout is refused", res(Resources{SessionTimeout: -time.Second}), "session timeout limit is negative"},
		{"negative cpus are refused", res(Resources{CPUs: -0.5}), "cpus limit is negative"},
		{"memory below 4 MiB is refused", res(Resources{MemoryBytes: 1 << 20}), "below the 4 MiB minimum"},
		{"memory of exactly 4 MiB is valid", res(Resources{MemoryBytes: 4 << 20}), ""},
		{"a relative read-only path is refused", Policy{Filesystem: FilesystemPolicy{ReadOnly: []string{"data"}}}, "absolute sandbox path"},
		{"a relative denied path is refused", Policy{Filesystem: FilesystemPolicy{Deny: []string{"secrets"}}}, "absolute sandbox path"},
		{"absolute read-only and denied paths are valid", Policy{Filesystem: FilesystemPolicy{ReadOnly: []string{"/workspace/in"}, Deny: []string{"/workspace/.git"}}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.p.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("err = %v, want valid", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want ErrInvalid mentioning %q", err, tt.wantErr)
			}
		})
	}
}

func TestPolicyRequires(t *testing.T) {
	base := []Part{PartFilesystem, PartProcesses, PartIdentity, PartOutput}
	tests := []struct {
		name string
		p    Policy
		want []Part
	}{
		{"the zero policy needs isolation, output and no network", Policy{}, append(base, PartNetworkNone)},
		{"an allow-list needs the allow-list part instead of none", Policy{Network: NetworkPolicy{Mode: NetworkAllowList, Allow: []string{"a.com"}}}, append(base, PartNetworkAllowList)},
		{"host network needs no network part", Policy{Network: NetworkPolicy{Mode: NetworkHost}}, base},
		{"read-only paths need their part", Policy{Network: NetworkPolicy{Mode: NetworkHost}, Filesystem: FilesystemPolicy{ReadOnly: []string{"/x"}}}, append(base, PartReadOnlyPaths)},
		{"denied paths need their part", Policy{Network: NetworkPolicy{Mode: NetworkHost}, Filesystem: FilesystemPolicy{Deny: []string{"/x"}}}, append(base, PartDenyPaths)},
		{"each resource limit needs its part", Policy{Network: NetworkPolicy{Mode: NetworkHost}, Resources: Resources{MemoryBytes: 8 << 20, Pids: 10, CPUs: 1, DiskBytes: 1 << 30}},
			append(base, PartMemory, PartPids, PartCPU, PartDisk)},
		{"an exec timeout needs the timeout part", Policy{Network: NetworkPolicy{Mode: NetworkHost}, Resources: Resources{ExecTimeout: time.Second}}, append(base, PartTimeout)},
		{"a session timeout needs the timeout part", Policy{Network: NetworkPolicy{Mode: NetworkHost}, Resources: Resources{SessionTimeout: time.Second}}, append(base, PartTimeout)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.p.Requires()
			if !slices.Equal(got, tt.want) {
				t.Fatalf("Requires() = %v, want %v", got, tt.want)
			}
			for _, part := range got {
				if !slices.Contains(AllParts, part) {
					t.Errorf("part %q is not in AllParts", part)
				}
			}
		})
	}
}

func TestCheck(t *testing.T) {
	strict := Policy{Resources: Resources{MemoryBytes: 64 << 20}}
	tests := []struct {
		name        string
		enforces    []Part
		p           Policy
		allowWeaker bool
		wantMissing []Part
		wantKind    error
	}{
		{"a backend enforcing everything passes", AllParts, strict, false, nil, nil},
		{"missing parts are refused, each named", []Part{PartFilesystem, PartProcesses, PartIdentity, PartOutput}, strict, false,
			[]Part{PartNetworkNone, PartMemory}, ErrPolicyUnsupported},
		{"allow-weaker returns the missing parts without an error", []Part{PartOutput}, strict, true,
			[]Part{PartFilesystem, PartProcesses, PartIdentity, PartNetworkNone, PartMemory}, nil},
		{"an invalid policy is refused before parts are compared", AllParts, Policy{Resources: Resources{Pids: -1}}, true, nil, ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logs, nil))
			missing, err := Check("test", tt.enforces, tt.p, tt.allowWeaker, log)
			if !slices.Equal(missing, tt.wantMissing) {
				t.Errorf("missing = %v, want %v", missing, tt.wantMissing)
			}
			if tt.wantKind == nil {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
			} else if !errors.Is(err, tt.wantKind) {
				t.Fatalf("err = %v, want %v", err, tt.wantKind)
			}
			if errors.Is(err, ErrPolicyUnsupported) {
				for _, m := range tt.wantMissing {
					if !strings.Contains(err.Error(), string(m)) {
						t.Errorf("error %q does not name %s", err, m)
					}
				}
				if !strings.Contains(err.Error(), "test: create") || !strings.Contains(err.Error(), "--allow-weaker") {
					t.Errorf("error %q does not say which backend refused and how to override", err)
				}
				if !strings.Contains(err.Error(), "'agentbox backends' says why") {
					t.Errorf("error %q does not say where to learn why the host cannot", err)
				}
			}
			if tt.allowWeaker && err == nil {
				for _, m := range tt.wantMissing {
					if !strings.Contains(logs.String(), string(m)) {
						t.Errorf("weakened part %s not logged: %s", m, logs.String())
					}
				}
			} else if logs.Len() != 0 {
				t.Errorf("logged without allow-weaker: %s", logs.String())
			}
		})
	}
}

func TestEffectiveMode(t *testing.T) {
	if m := (NetworkPolicy{}).EffectiveMode(); m != NetworkNone {
		t.Fatalf("empty mode = %q, want none", m)
	}
	if m := (NetworkPolicy{Mode: NetworkHost}).EffectiveMode(); m != NetworkHost {
		t.Fatalf("host mode = %q", m)
	}
}
