package trace

import (
	"encoding/base64"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Redacted replaces every secret a Redactor finds.
const Redacted = "[redacted]"

// DefaultPatterns are the secret shapes every trace redacts: provider API
// keys and tokens whose form is public, private keys, JSON Web Tokens, and
// the values of authorization headers and of password, secret, token and
// API-key assignments. A pattern with a group named "secret" has only that
// group replaced, so the reader still sees what was hidden.
var DefaultPatterns = []string{
	`\bsk-[A-Za-z0-9_-]{20,}`,                                         // OpenAI, Anthropic
	`\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`,                                   // AWS access key ids
	`\bgh[pousr]_[A-Za-z0-9]{36,}`,                                    // GitHub tokens
	`\bgithub_pat_[A-Za-z0-9_]{22,}`,                                  // GitHub fine-grained tokens
	`\bglpat-[A-Za-z0-9_-]{20,}`,                                      // GitLab tokens
	`\bxox[abposr]-[A-Za-z0-9-]{10,}`,                                 // Slack tokens
	`\bAIza[0-9A-Za-z_-]{35}`,                                         // Google API keys
	`\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}`, // JSON Web Tokens
	`-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)`,
	`(?i)\b(?:proxy-)?authorization["']?\s*[:=]\s*["']?(?:(?:bearer|basic|token|digest)\s+)?(?P<secret>[^\s"',;]+)`,
	`(?i)\b[a-z0-9_.-]*(?:password|passwd|secret|api[_-]?key|access[_-]?key|auth[_-]?token|access[_-]?token)["']?\s*[:=]\s*["']?(?P<secret>[^\s"',;&]{6,})`,
}

// Redactor hides secrets in trace text: literal values (the credentials
// the egress proxy injects, the model's API key) and patterns. It is safe
// for concurrent use.
type Redactor struct {
	mu       sync.RWMutex
	secrets  []string
	patterns []*regexp.Regexp
}

// NewRedactor compiles DefaultPatterns and extra patterns (Go regular
// expressions); an invalid pattern is an error naming it.
func NewRedactor(extra ...string) (*Redactor, error) {
	r := &Redactor{}
	for _, p := range append(slices.Clone(DefaultPatterns), extra...) {
		if err := r.AddPattern(p); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func defaultRedactor() *Redactor {
	r, err := NewRedactor()
	if err != nil {
		panic(err) // DefaultPatterns are constants, tested to compile
	}
	return r
}

// AddPattern adds a regular expression whose matches are redacted (only
// its "secret" group when it has one).
func (r *Redactor) AddPattern(pattern string) error {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return fmt.Errorf("trace: redaction pattern %q: %w", pattern, err)
	}
	r.mu.Lock()
	r.patterns = append(r.patterns, re)
	r.mu.Unlock()
	return nil
}

// AddSecret adds literal values that never appear in the trace. A header
// value such as "Bearer TOKEN" or "Basic BASE64" adds its token too, and
// for Basic the decoded user:password and password, since a command may
// print any of these forms. Empty values are ignored, and so is a nil
// Redactor (a nil Writer's).
func (r *Redactor) AddSecret(values ...string) {
	if r == nil {
		return
	}
	var add []string
	for _, v := range values {
		v = strings.TrimSpace(v)
		if v == "" {
			continue
		}
		add = append(add, v)
		scheme, token, ok := strings.Cut(v, " ")
		if !ok {
			continue
		}
		token = strings.TrimSpace(token)
		add = append(add, token)
		if strings.EqualFold(scheme, "basic") {
			if dec, err := base64.StdEncoding.DecodeString(token); err == nil && len(dec) > 0 {
				add = append(add, string(dec))
				if _, pass, ok := strings.Cut(string(dec), ":"); ok && pass != "" {
					add = append(add, pass)
				}
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range add {
		if !slices.Contains(r.secrets, s) {
			r.secrets = append(r.secrets, s)
		}
	}
	// Longest first, so a value that contains another is hidden whole.
	slices.SortFunc(r.secrets, func(a, b string) int { return len(b) - len(a) })
}

// Redact returns s with every secret and pattern match replaced by
// Redacted. A nil Redactor returns s.
func (r *Redactor) Redact(s string) string {
	if r == nil || s == "" {
		return s
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, sec := range r.secrets {
		s = strings.ReplaceAll(s, sec, Redacted)
	}
	for _, re := range r.patterns {
		s = redactMatches(re, s)
	}
	return s
}

// redactMatches replaces re's matches in s, or only their "secret" group.
func redactMatches(re *regexp.Regexp, s string) string {
	g := re.SubexpIndex("secret")
	if g < 0 {
		return re.ReplaceAllLiteralString(s, Redacted)
	}
	var b strings.Builder
	last := 0
	for _, m := range re.FindAllStringSubmatchIndex(s, -1) {
		start, end := m[2*g], m[2*g+1]
		if start < 0 || s[start:end] == Redacted {
			continue
		}
		b.WriteString(s[last:start])
		b.WriteString(Redacted)
		last = end
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}
