package sandbox

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseRequestRule(t *testing.T) {
	for in, want := range map[string]RequestRule{
		"GET,HEAD api.github.com/repos/acme/**": {Host: "api.github.com", Methods: []string{"GET", "HEAD"}, Paths: []string{"/repos/acme/**"}},
		"* api.openai.com":                      {Host: "api.openai.com"},
		"POST *.example.com:8443/v1/*":          {Host: "*.example.com:8443", Methods: []string{"POST"}, Paths: []string{"/v1/*"}},
	} {
		got, err := ParseRequestRule(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("ParseRequestRule(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		if back, err := ParseRequestRule(got.String()); err != nil || !reflect.DeepEqual(back, want) {
			t.Errorf("String %q does not parse back: %+v, %v", got.String(), back, err)
		}
	}
	for _, bad := range []string{"api.github.com", "get api.github.com", "GET https://api.github.com/", "GET api.github.com/a/../b", "CONNECT a.com", "GET a.com/x?y"} {
		if _, err := ParseRequestRule(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseRequestRule(%q) = %v, want ErrInvalid", bad, err)
		}
	}
}

func TestParseCredential(t *testing.T) {
	for in, want := range map[string]Credential{
		"api.openai.com=placeholder:OPENAI_API_KEY:env:OPENAI_API_KEY": {Host: "api.openai.com", Kind: CredPlaceholder, Name: "OPENAI_API_KEY", Source: "env:OPENAI_API_KEY"},
		"api.github.com/repos=bearer:file:/run/secrets/gh":             {Host: "api.github.com", PathPrefix: "/repos", Kind: CredBearer, Source: "file:/run/secrets/gh"},
		"ledger.acme.test=header:X-Api-Key:cmd:pass show ledger":       {Host: "ledger.acme.test", Kind: CredHeader, Name: "X-Api-Key", Source: "cmd:pass show ledger"},
		"git.acme.test=basic:env:GIT_USERPASS":                         {Host: "git.acme.test", Kind: CredBasic, Source: "env:GIT_USERPASS"},
	} {
		got, err := ParseCredential(in)
		if err != nil || got != want {
			t.Errorf("ParseCredential(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{
		"api.openai.com", "api.openai.com=token:env:X", "api.openai.com=bearer:value:sk-123",
		"api.openai.com=placeholder:1BAD:env:X", "api.openai.com=header:Bad Name:env:X", "https://x.com=bearer:env:X",
	} {
		_, err := ParseCredential(bad)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseCredential(%q) = %v, want ErrInvalid", bad, err)
		}
		if err != nil && strings.Contains(err.Error(), "sk-123") {
			t.Errorf("the error %q echoes the source", err)
		}
	}
	c, _ := ParseCredential("a.com=bearer:cmd:echo sk-123")
	if strings.Contains(c.String(), "sk-123") {
		t.Errorf("String %q shows the command", c.String())
	}
}

func TestSecretsAreNeverSerialized(t *testing.T) {
	p := Policy{Network: NetworkPolicy{Mode: NetworkAllowList, Allow: []string{"api.openai.com"},
		Secrets: []Credential{{Host: "api.openai.com", Kind: CredBearer, Source: "cmd:echo sk-123"}},
		Rules:   []RequestRule{{Host: "api.openai.com", Methods: []string{"POST"}}}}}
	b, err := json.Marshal(Spec{Policy: p})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "sk-123") || strings.Contains(string(b), "cmd:") {
		t.Errorf("a Spec's JSON holds a secret's source: %s", b)
	}
	if !strings.Contains(string(b), `"rules"`) {
		t.Errorf("a Spec's JSON lost the request rules: %s", b)
	}
}

func TestInspectionNeedsTheAllowList(t *testing.T) {
	for name, n := range map[string]NetworkPolicy{
		"a rule for an unlisted host": {Mode: NetworkAllowList, Allow: []string{"a.com"}, Rules: []RequestRule{{Host: "b.com"}}},
		"inspection without a list":   {Mode: NetworkNone, Inspect: []string{"a.com"}},
		"a secret for an unlisted host": {Mode: NetworkAllowList, Allow: []string{"a.com"},
			Secrets: []Credential{{Host: "b.com", Kind: CredBearer, Source: "env:X"}}},
	} {
		if err := (Policy{Network: n}).Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Validate = %v, want ErrInvalid", name, err)
		}
	}
	ok := NetworkPolicy{Mode: NetworkAllowList, Allow: []string{"*.github.com"}, Rules: []RequestRule{{Host: "api.github.com", Methods: []string{"GET"}}}}
	if err := (Policy{Network: ok}).Validate(); err != nil {
		t.Errorf("a rule for a host a wildcard admits: %v", err)
	}
}

func TestBoundKeepsTheOperatorsRulesAndSecrets(t *testing.T) {
	ceiling := Policy{Network: NetworkPolicy{Mode: NetworkAllowList, Allow: []string{"api.github.com", "api.openai.com"},
		Rules:   []RequestRule{{Host: "api.github.com", Methods: []string{"GET"}}},
		Secrets: []Credential{{Host: "api.github.com", Kind: CredBearer, Source: "env:GH"}, {Host: "api.openai.com", Kind: CredBearer, Source: "env:OA"}}}}
	got, err := Bound(ceiling, Policy{Network: NetworkPolicy{Mode: NetworkAllowList, Allow: []string{"api.github.com"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Network.Rules) != 1 || len(got.Network.Secrets) != 1 || got.Network.Secrets[0].Source != "env:GH" {
		t.Errorf("Bound kept rules %v and secrets %v, want the operator's for api.github.com only", got.Network.Rules, got.Network.Secrets)
	}
	_, err = Bound(ceiling, Policy{Network: NetworkPolicy{Mode: NetworkAllowList, Allow: []string{"api.github.com"},
		Rules: []RequestRule{{Host: "api.github.com", Methods: []string{"DELETE"}}}}})
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("a caller's rule beside the operator's for the same host: %v, want ErrInvalid", err)
	}
	got, err = Bound(ceiling, Policy{Network: NetworkPolicy{Mode: NetworkAllowList, Allow: []string{"api.openai.com"},
		Rules: []RequestRule{{Host: "api.openai.com", Methods: []string{"POST"}}}}})
	if err != nil || len(got.Network.Rules) != 1 || got.Network.Rules[0].Methods[0] != "POST" {
		t.Errorf("a caller's rule for a host the operator left unruled: %+v, %v", got.Network.Rules, err)
	}
}
