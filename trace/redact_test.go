package trace

import (
	"bytes"
	"encoding/base64"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

func TestRedactorHidesSecretShapes(t *testing.T) {
	r, err := NewRedactor()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, in, want string }{
		{"an OpenAI key", "export OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwx", "export OPENAI_API_KEY=[redacted]"},
		{"an AWS access key id", "aws_access_key_id = AKIAIOSFODNN7EXAMPLE", "aws_access_key_id = [redacted]"},
		{"a GitHub token", "token ghp_0123456789abcdefghijklmnopqrstuvwxyz used", "token [redacted] used"},
		{"a Slack token", "xoxb-123456789012-abcdefghij", "[redacted]"},
		{"a JSON Web Token", "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NSJ9.c2lnbmF0dXJlLXZhbHVl end", "jwt [redacted] end"},
		{"a private key", "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----\nafter", "[redacted]\nafter"},
		{"a private key cut short", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNz", "[redacted]"},
		{"an authorization header keeps its name and scheme", "Authorization: Bearer abc.def-123", "Authorization: Bearer [redacted]"},
		{"a proxy authorization header", `"proxy-authorization": "Basic dXNlcjpwYXNz"`, `"proxy-authorization": "Basic [redacted]"`},
		{"a password assignment keeps its key", "DB_PASSWORD=hunter2hunter2", "DB_PASSWORD=[redacted]"},
		{"an api key in JSON keeps its key", `{"api_key": "k-1234567890"}`, `{"api_key": "[redacted]"}`},
		{"token counts are not secrets", "tokens in 100 out 20, max_output_tokens: 1000", "tokens in 100 out 20, max_output_tokens: 1000"},
		{"hashes are not secrets", "sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", "sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"},
		{"a ledger line is not a secret", "2026-03-02,INV-1042,Acme Ltd,1200.00,paid", "2026-03-02,INV-1042,Acme Ltd,1200.00,paid"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := r.Redact(tt.in); got != tt.want {
				t.Errorf("Redact(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestRedactorHidesEveryFormOfAnInjectedCredential(t *testing.T) {
	r, _ := NewRedactor()
	basic := base64.StdEncoding.EncodeToString([]byte("svc-reader:Pa55-w0rd!x"))
	r.AddSecret("Bearer opaque-7f3a9c", "Basic "+basic, "", "plainvalue-99")
	for _, in := range []string{
		"header Bearer opaque-7f3a9c",
		"just the token opaque-7f3a9c",
		"Basic " + basic,
		"curl -u svc-reader:Pa55-w0rd!x",
		"password is Pa55-w0rd!x",
		"plainvalue-99",
	} {
		got := r.Redact(in)
		for _, secret := range []string{"opaque-7f3a9c", basic, "Pa55-w0rd!x", "plainvalue-99"} {
			if strings.Contains(got, secret) {
				t.Errorf("Redact(%q) = %q still holds %q", in, got, secret)
			}
		}
	}
	if got := r.Redact("nothing to hide"); got != "nothing to hide" {
		t.Errorf("an empty secret changed plain text: %q", got)
	}
}

func TestRedactorRejectsABadPattern(t *testing.T) {
	if _, err := NewRedactor("(unclosed"); err == nil || !strings.Contains(err.Error(), `"(unclosed"`) {
		t.Fatalf("error %v, want one naming the pattern", err)
	}
}

// fillStrings sets every string the event can hold, however deep, to s.
func fillStrings(v reflect.Value, s string) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Field(i).CanSet() {
				fillStrings(v.Field(i), s)
			}
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fillStrings(v.Index(0), s)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillStrings(v.Elem(), s)
	}
}

// Every text field of every event type passes the redactor and the bound,
// including fields added later: the test fills them all by reflection.
func TestWriterScrubsEveryTextField(t *testing.T) {
	const secret = "opaque-credential-value"
	var buf bytes.Buffer
	w := New(&buf)
	w.Redactor().AddSecret(secret)
	var e Event
	fillStrings(reflect.ValueOf(&e).Elem(), "x "+secret+" y")
	e.Type = ToolResult
	tools := []string{"keep " + secret}
	e.Tools = tools
	if err := w.Emit(e); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), secret) {
		t.Fatalf("a field kept the secret:\n%s", buf.String())
	}
	if tools[0] != "keep "+secret {
		t.Errorf("the caller's slice was changed: %q", tools[0])
	}

	buf.Reset()
	long := strings.Repeat("a", MaxField) + "TAIL"
	if err := w.Emit(Event{Type: ToolResult, Output: long}); err != nil {
		t.Fatal(err)
	}
	evs, err := Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	out := evs[0].Output
	if len(out) > MaxField || !strings.HasSuffix(out, "TAIL") || !regexp.MustCompile(`…\[truncated \d+ bytes\]…`).MatchString(out) {
		t.Errorf("a long field is %d bytes, ends %q, and has no truncation marker", len(out), out[len(out)-8:])
	}
}
