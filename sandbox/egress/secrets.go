package egress

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/agentbox/agentbox/sandbox"
)

// PlaceholderPrefix starts every placeholder the sandbox sees instead of
// a secret.
const PlaceholderPrefix = "agentbox-ph-"

// sourceTimeout bounds a cmd: credential source.
const sourceTimeout = 10 * time.Second

// secret is a resolved sandbox.Credential: its value lives only here.
type secret struct {
	sandbox.Credential
	host  pattern
	value string
	// placeholder is what the sandbox sees, for CredPlaceholder.
	placeholder string
}

// resolveSecrets reads every credential's value from its source (outside
// the sandbox) and makes placeholders. Errors name the credential and the
// source kind, never the value.
func (p *Proxy) resolveSecrets(creds []sandbox.Credential) ([]secret, error) {
	out := make([]secret, 0, len(creds))
	for _, c := range creds {
		if err := c.Validate(); err != nil {
			return nil, err
		}
		pat, err := parsePattern(c.Host)
		if err != nil {
			return nil, err
		}
		if !p.covers(pat) {
			return nil, sandbox.Errorf(sandbox.ErrInvalid, "egress: credential for %q, which the allow-list does not admit", c.Host)
		}
		v, err := readSource(c.Source)
		if err != nil {
			return nil, sandbox.Errorf(sandbox.ErrInvalid, "egress: credential for %s: %v", c.Host, err)
		}
		s := secret{Credential: c, host: pat, value: v}
		if c.Kind == sandbox.CredPlaceholder {
			var b [16]byte
			if _, err := rand.Read(b[:]); err != nil {
				return nil, fmt.Errorf("egress: placeholder: %w", err)
			}
			s.placeholder = PlaceholderPrefix + hex.EncodeToString(b[:])
		}
		out = append(out, s)
	}
	return out, nil
}

// readSource reads a credential's value. The value is never put in an
// error: a command's output or a file's content may be anything.
func readSource(src string) (string, error) {
	kind, arg, _ := strings.Cut(src, ":")
	var v string
	switch kind {
	case "env":
		val, ok := os.LookupEnv(arg)
		if !ok || val == "" {
			return "", fmt.Errorf("environment variable %s is not set in agentbox's environment", arg)
		}
		v = val
	case "file":
		b, err := os.ReadFile(arg)
		if err != nil {
			return "", fmt.Errorf("read the credential file: %w", err)
		}
		v = string(b)
	case "cmd":
		ctx, cancel := context.WithTimeout(context.Background(), sourceTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, "sh", "-c", arg)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		b, err := cmd.Output()
		if err != nil {
			// Not the command line (it may hold a secret), nor its output.
			return "", fmt.Errorf("the credential command failed: %w", err)
		}
		v = string(b)
	default:
		return "", fmt.Errorf("source kind %q is not env, file or cmd", kind)
	}
	v = strings.TrimSuffix(strings.TrimSuffix(v, "\n"), "\r")
	if v == "" {
		return "", fmt.Errorf("the %s source gave an empty value", kind)
	}
	if strings.ContainsAny(v, "\r\n\x00") {
		return "", fmt.Errorf("the %s source's value spans lines or holds NUL; a header value cannot", kind)
	}
	return v, nil
}

// appliesTo reports whether s is for a request to t at escapedPath.
func (s *secret) appliesTo(t target, escapedPath string) bool {
	if !s.host.matchesHost(t) || s.host.port != 0 && s.host.port != t.port {
		return false
	}
	pre := s.PathPrefix
	return pre == "" || escapedPath == pre || strings.HasPrefix(escapedPath, strings.TrimSuffix(pre, "/")+"/")
}

// Placeholders maps each placeholder credential's environment variable
// to the placeholder the sandbox must see in it.
func (p *Proxy) Placeholders() map[string]string {
	m := map[string]string{}
	for _, s := range p.secrets {
		if s.placeholder != "" {
			m[s.Name] = s.placeholder
		}
	}
	return m
}

// misplacedPlaceholder returns why r, going to t, carries a placeholder
// that is not for it (in its URL or a header), or "".
func (p *Proxy) misplacedPlaceholder(r *http.Request, t target) string {
	if !p.hasPlaceholders {
		return ""
	}
	esc := r.URL.EscapedPath()
	for i := range p.secrets {
		s := &p.secrets[i]
		if s.placeholder == "" || s.appliesTo(t, esc) || !requestHolds(r, s.placeholder) {
			continue
		}
		return exfiltration(s, t)
	}
	return ""
}

func exfiltration(s *secret, t target) string {
	return fmt.Sprintf("the request carries the placeholder of $%s, which is only for %s%s, to %s: refused as an exfiltration attempt",
		s.Name, s.Host, s.PathPrefix, t.String())
}

// requestHolds reports whether ph appears in r's URL or headers, plain or
// URL-encoded (it is URL-safe, so the encodings agree).
func requestHolds(r *http.Request, ph string) bool {
	if strings.Contains(r.URL.RawQuery, ph) || strings.Contains(r.URL.EscapedPath(), ph) || strings.Contains(r.Host, ph) {
		return true
	}
	for name, vs := range r.Header {
		if strings.Contains(name, ph) {
			return true
		}
		for _, v := range vs {
			if strings.Contains(v, ph) {
				return true
			}
		}
	}
	return false
}

// injectSecrets sets the header credentials and swaps the placeholders
// that apply to out, a request to t. Only over TLS: a secret added to
// plain HTTP would cross the network in clear text, so a plain request to
// the host goes without it (a placeholder stays a placeholder).
func (p *Proxy) injectSecrets(out *http.Request, t target) {
	if out.URL.Scheme != "https" {
		return
	}
	esc := out.URL.EscapedPath()
	for i := range p.secrets {
		s := &p.secrets[i]
		if !s.appliesTo(t, esc) {
			continue
		}
		switch s.Kind {
		case sandbox.CredBearer:
			out.Header.Set("Authorization", "Bearer "+s.value)
		case sandbox.CredBasic:
			out.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(s.value)))
		case sandbox.CredHeader:
			out.Header.Set(s.Name, s.value)
		case sandbox.CredPlaceholder:
			for name, vs := range out.Header {
				for j, v := range vs {
					out.Header[name][j] = strings.ReplaceAll(v, s.placeholder, s.value)
				}
			}
			if strings.Contains(out.URL.RawQuery, s.placeholder) {
				out.URL.RawQuery = strings.ReplaceAll(out.URL.RawQuery, s.placeholder, url.QueryEscape(s.value))
			}
		}
	}
}

// secretValues are the values of the secrets and credentials for t, which
// must not come back to the sandbox.
func (p *Proxy) secretValues(t target) []string {
	var vals []string
	for _, c := range p.creds {
		if c.pattern.matchesHost(t) {
			for _, vs := range c.headers {
				for _, v := range vs {
					if v != "" {
						vals = append(vals, v)
					}
				}
			}
		}
	}
	for _, s := range p.secrets {
		if s.host.matchesHost(t) {
			vals = append(vals, s.value)
			if s.Kind == sandbox.CredBasic {
				vals = append(vals, base64.StdEncoding.EncodeToString([]byte(s.value)))
			}
		}
	}
	return vals
}

// errPlaceholderInBody ends an upstream request whose body carries a
// placeholder that is not for its host.
type errPlaceholderInBody struct{ reason string }

func (e *errPlaceholderInBody) Error() string { return e.reason }

// scanBody wraps r's body so that the bytes of a placeholder that is not
// for t never leave: reading stops with errPlaceholderInBody before them.
func (p *Proxy) scanBody(r *http.Request, t target) {
	if !p.hasPlaceholders || r.Body == nil || r.Body == http.NoBody {
		return
	}
	var watch []*secret
	esc := r.URL.EscapedPath()
	for i := range p.secrets {
		s := &p.secrets[i]
		if s.placeholder != "" && !s.appliesTo(t, esc) {
			watch = append(watch, s)
		}
	}
	if len(watch) > 0 {
		r.Body = &placeholderScanner{rc: r.Body, watch: watch, t: t}
	}
}

// placeholderScanner passes a body through, holding back the last bytes
// that could begin a placeholder until the next read shows they do not.
type placeholderScanner struct {
	rc    io.ReadCloser
	watch []*secret
	t     target
	buf   []byte // read, not yet returned
	eof   bool
	err   error
}

func (b *placeholderScanner) Read(out []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	hold := len(PlaceholderPrefix) + 32 - 1
	for !b.eof && len(b.buf) <= hold {
		chunk := make([]byte, 32<<10)
		n, err := b.rc.Read(chunk)
		b.buf = append(b.buf, chunk[:n]...)
		if errors.Is(err, io.EOF) {
			b.eof = true
		} else if err != nil {
			return 0, err
		}
		if n == 0 && err == nil {
			break
		}
	}
	for _, s := range b.watch {
		if bytes.Contains(b.buf, []byte(s.placeholder)) {
			b.err = &errPlaceholderInBody{reason: "body: " + exfiltration(s, b.t)}
			return 0, b.err
		}
	}
	ready := len(b.buf)
	if !b.eof {
		ready -= hold
	}
	if ready <= 0 {
		if b.eof {
			return 0, io.EOF
		}
		return 0, nil
	}
	n := copy(out, b.buf[:ready])
	b.buf = b.buf[n:]
	return n, nil
}

func (b *placeholderScanner) Close() error { return b.rc.Close() }
