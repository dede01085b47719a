package egress

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/sandbox"
)

func TestParsePatternRejectsBadEntries(t *testing.T) {
	tests := []struct {
		name  string
		entry string
	}{
		{"an empty entry is rejected", ""},
		{"a bare wildcard is rejected", "*"},
		{"a wildcard in the middle is rejected", "a.*.example.com"},
		{"a wildcard on an IP is rejected", "*.10.0.0.1"},
		{"a zero port is rejected", "example.com:0"},
		{"a port over 65535 is rejected", "example.com:65536"},
		{"an empty port is rejected", "example.com:"},
		{"spaces are rejected", " example.com"},
		{"a URL is rejected", "http://example.com"},
		{"a path is rejected", "example.com/x"},
		{"a short numeric name is rejected", "1.2.3"},
		{"an IPv6 literal with a zone is rejected", "[fe80::1%eth0]"},
		{"an unclosed IPv6 bracket is rejected", "[::1"},
		{"an underscore is rejected", "a_b.example.com"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parsePattern(tt.entry)
			if err == nil {
				t.Fatalf("parsePattern(%q) accepted it", tt.entry)
			}
			if !errors.Is(err, sandbox.ErrInvalid) {
				t.Errorf("error %v is not ErrInvalid", err)
			}
		})
	}
}

func TestAllowListMatching(t *testing.T) {
	tests := []struct {
		name    string
		allow   []string
		request string // host:port as requested
		allowed bool
		reason  string // part of the refusal
	}{
		{"an exact name on 443 is allowed", []string{"api.example.test"}, "api.example.test:443", true, ""},
		{"an exact name on 80 is allowed", []string{"api.example.test"}, "api.example.test:80", true, ""},
		{"an exact name on another port is refused", []string{"api.example.test"}, "api.example.test:8443", false, "port 8443 of api.example.test"},
		{"a listed port is allowed", []string{"api.example.test:8443"}, "api.example.test:8443", true, ""},
		{"443 is refused when another port is listed", []string{"api.example.test:8443"}, "api.example.test:443", false, "port 443"},
		{"names match case-insensitively", []string{"API.Example.Test"}, "api.EXAMPLE.test:443", true, ""},
		{"a trailing dot is ignored", []string{"api.example.test"}, "api.example.test.:443", true, ""},
		{"a wildcard matches a subdomain", []string{"*.example.test"}, "a.example.test:443", true, ""},
		{"a wildcard matches a deeper subdomain", []string{"*.example.test"}, "b.a.example.test:443", true, ""},
		{"a wildcard does not match the apex", []string{"*.example.test"}, "example.test:443", false, "host example.test is not"},
		{"a wildcard does not match a suffix attack", []string{"*.example.test"}, "example.test.evil:443", false, "not in the allow-list"},
		{"a wildcard does not match a glued prefix", []string{"*.example.test"}, "badexample.test:443", false, "not in the allow-list"},
		{"an exact name does not match its subdomain", []string{"example.test"}, "a.example.test:443", false, "not in the allow-list"},
		{"an unlisted IP literal is refused", []string{"example.test"}, "10.0.0.1:443", false, "host 10.0.0.1 is not"},
		{"a listed IP literal is allowed", []string{"127.0.0.1:8080"}, "127.0.0.1:8080", true, ""},
		{"an IPv4-mapped IPv6 literal matches its IPv4 entry", []string{"127.0.0.1:8080"}, "[::ffff:127.0.0.1]:8080", true, ""},
		{"a name does not match an IP entry", []string{"127.0.0.1:8080"}, "localhost:8080", false, "host localhost is not"},
		{"a listed IPv6 literal is allowed", []string{"[2001:4860::8888]:443"}, "[2001:4860::8888]:443", true, ""},
		{"a wildcard with a port allows only that port", []string{"*.example.test:8080"}, "a.example.test:443", false, "port 443"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var a allowList
			for _, e := range tt.allow {
				p, err := parsePattern(e)
				if err != nil {
					t.Fatalf("parsePattern(%q): %v", e, err)
				}
				a = append(a, p)
			}
			tg, err := parseTarget(tt.request, 0)
			if err != nil {
				t.Fatalf("parseTarget(%q): %v", tt.request, err)
			}
			err = a.check(tg)
			if tt.allowed && err != nil {
				t.Errorf("refused: %v", err)
			}
			if !tt.allowed && (err == nil || !strings.Contains(err.Error(), tt.reason)) {
				t.Errorf("error = %v, want a refusal containing %q", err, tt.reason)
			}
		})
	}
}

func TestParseTargetRejectsMalformedHosts(t *testing.T) {
	for _, tt := range []struct {
		name, hostport string
	}{
		{"a missing port is rejected", "example.test"},
		{"a bad port is rejected", "example.test:http"},
		{"a space in the name is rejected", "exa mple.test:443"},
		{"a wildcard is rejected", "*.example.test:443"},
		{"a NUL is rejected", "example.test\x00.evil:443"},
		{"an IPv6 zone is rejected", "[fe80::1%25eth0]:443"},
		{"an empty host is rejected", ":443"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tg, err := parseTarget(tt.hostport, 0); err == nil {
				t.Errorf("parseTarget(%q) = %+v, want an error", tt.hostport, tg)
			}
		})
	}
}

func TestIsPublic(t *testing.T) {
	for _, tt := range []struct {
		ip     string
		public bool
	}{
		{"8.8.8.8", true},
		{"2001:4860:4860::8888", true},
		{"127.0.0.1", false},
		{"127.1.2.3", false},
		{"::1", false},
		{"::ffff:127.0.0.1", false},
		{"10.1.2.3", false},
		{"172.16.0.1", false},
		{"192.168.1.1", false},
		{"169.254.169.254", false},
		{"fe80::1", false},
		{"fd00::1", false},
		{"0.0.0.0", false},
		{"::", false},
		{"100.64.0.1", false},
		{"224.0.0.1", false},
		{"255.255.255.255", false},
		{"64:ff9b::a00:1", false},
		{"2002:a00:1::1", false},
	} {
		name := tt.ip + " is not public"
		if tt.public {
			name = tt.ip + " is public"
		}
		t.Run(name, func(t *testing.T) {
			if got := isPublic(mustAddr(t, tt.ip)); got != tt.public {
				t.Errorf("isPublic(%s) = %v", tt.ip, got)
			}
		})
	}
}
