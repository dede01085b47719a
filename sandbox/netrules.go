package sandbox

import (
	"strings"
)

// RequestRule admits requests to one host of the allow-list by method and
// path. A host that has rules is inspected (the egress proxy terminates
// its TLS) and a request to it must match one of its rules; a request
// that matches none is refused with 403 and recorded as a violation.
type RequestRule struct {
	// Host is an allow-list entry or a host one admits ("*.x.com" and
	// ":port" as in NetworkPolicy.Allow).
	Host string `json:"host"`
	// Methods are the allowed methods, upper case; empty: any.
	Methods []string `json:"methods,omitempty"`
	// Paths are path globs ("/repos/acme/**"): "*" matches within one
	// segment, "**" across segments; empty: any path.
	Paths []string `json:"paths,omitempty"`
}

// String is the rule's flag form, "METHODS HOST[PATH]" (see
// ParseRequestRule).
func (r RequestRule) String() string {
	m := "*"
	if len(r.Methods) > 0 {
		m = strings.Join(r.Methods, ",")
	}
	if len(r.Paths) == 0 {
		return m + " " + r.Host
	}
	return m + " " + r.Host + strings.Join(r.Paths, ","+r.Host)
}

// ParseRequestRule reads a rule written like a request line:
// "GET,HEAD api.github.com/repos/acme/**" (methods, then the host and an
// optional path glob); "*" for any method, no path for any path.
func ParseRequestRule(s string) (RequestRule, error) {
	methods, rest, ok := strings.Cut(strings.TrimSpace(s), " ")
	rest = strings.TrimSpace(rest)
	if !ok || rest == "" {
		return RequestRule{}, Errorf(ErrInvalid, "request rule %q: want \"METHODS HOST[/PATH-GLOB]\", e.g. \"GET,HEAD api.github.com/repos/acme/**\"", s)
	}
	var r RequestRule
	r.Host, _, _ = strings.Cut(rest, "/")
	if p := rest[len(r.Host):]; p != "" {
		r.Paths = []string{p}
	}
	if methods != "*" {
		r.Methods = strings.Split(methods, ",")
	}
	if err := r.Validate(); err != nil {
		return RequestRule{}, err
	}
	return r, nil
}

// Validate reports a malformed rule.
func (r RequestRule) Validate() error {
	if err := ValidateHostPattern(r.Host); err != nil {
		return Errorf(ErrInvalid, "request rule for %q: %v", r.Host, err)
	}
	for _, m := range r.Methods {
		if m == "" || m != strings.ToUpper(m) || strings.ContainsFunc(m, func(c rune) bool { return c < 'A' || c > 'Z' }) {
			return Errorf(ErrInvalid, "request rule for %s: method %q is not an upper-case HTTP method", r.Host, m)
		}
		if m == "CONNECT" {
			return Errorf(ErrInvalid, "request rule for %s: CONNECT is the proxy's own method", r.Host)
		}
	}
	for _, p := range r.Paths {
		if !strings.HasPrefix(p, "/") || strings.ContainsAny(p, "?# \t") {
			return Errorf(ErrInvalid, "request rule for %s: path %q must start with / and hold no query, fragment or space", r.Host, p)
		}
		for _, seg := range strings.Split(p, "/") {
			if seg == "." || seg == ".." {
				return Errorf(ErrInvalid, "request rule for %s: path %q has a dot segment", r.Host, p)
			}
		}
	}
	return nil
}

// Credential is a secret the egress proxy adds to requests to one host,
// read outside the sandbox, so that no secret ever enters it. It is never
// serialized (NetworkPolicy.Secrets is not): only the process that runs
// the proxy holds it, and only the operator's policy may give one.
type Credential struct {
	// Host is an allow-list entry or a host one admits.
	Host string
	// PathPrefix limits the credential to paths under it ("/v1"); empty:
	// every path.
	PathPrefix string
	// Kind is how the value is used: CredBearer, CredBasic, CredHeader or
	// CredPlaceholder.
	Kind CredentialKind
	// Name is the header for CredHeader, and for CredPlaceholder the
	// environment variable that gives the sandbox the placeholder.
	Name string
	// Source is where the proxy reads the value: "env:NAME" (agentbox's
	// own environment), "file:PATH" or "cmd:COMMAND" (run by sh -c, its
	// standard output); a trailing newline is dropped.
	Source string
}

// CredentialKind says how a Credential's value is sent.
type CredentialKind string

const (
	// CredBearer sets "Authorization: Bearer VALUE".
	CredBearer CredentialKind = "bearer"
	// CredBasic sets "Authorization: Basic base64(VALUE)", VALUE being
	// "user:password".
	CredBasic CredentialKind = "basic"
	// CredHeader sets the header Name to VALUE.
	CredHeader CredentialKind = "header"
	// CredPlaceholder gives the sandbox the environment variable Name set
	// to a random placeholder ("agentbox-ph-..."), which the proxy
	// replaces by VALUE in the headers and query of requests to Host
	// only; the placeholder sent anywhere else is refused as an
	// exfiltration attempt.
	CredPlaceholder CredentialKind = "placeholder"
)

// String is the flag form of c without its source's value (see
// ParseCredential); it names where the value comes from, never the value.
func (c Credential) String() string {
	kind := string(c.Kind)
	if c.Name != "" {
		kind += ":" + c.Name
	}
	src, _, _ := strings.Cut(c.Source, ":")
	return c.Host + c.PathPrefix + "=" + kind + ":" + src + ":…"
}

// ParseCredential reads "HOST[/PREFIX]=KIND:SOURCE" where KIND is bearer,
// basic, header:NAME or placeholder:ENVVAR and SOURCE is env:NAME,
// file:PATH or cmd:COMMAND; e.g.
// "api.openai.com=placeholder:OPENAI_API_KEY:env:OPENAI_API_KEY".
func ParseCredential(s string) (Credential, error) {
	where, how, ok := strings.Cut(s, "=")
	if !ok {
		return Credential{}, Errorf(ErrInvalid, "credential %q: want HOST[/PREFIX]=KIND:SOURCE (e.g. api.example.com=bearer:env:EXAMPLE_TOKEN)", redactSource(s))
	}
	var c Credential
	c.Host, _, _ = strings.Cut(where, "/")
	c.PathPrefix = where[len(c.Host):]
	kind, rest, _ := strings.Cut(how, ":")
	c.Kind = CredentialKind(kind)
	if c.Kind == CredHeader || c.Kind == CredPlaceholder {
		c.Name, rest, _ = strings.Cut(rest, ":")
	}
	c.Source = rest
	if err := c.Validate(); err != nil {
		return Credential{}, err
	}
	return c, nil
}

// redactSource keeps a malformed credential's text out of an error past
// the first ':' after '=', where an inline command could carry a secret.
func redactSource(s string) string {
	if i := strings.IndexByte(s, '='); i >= 0 {
		if j := strings.IndexByte(s[i:], ':'); j >= 0 {
			return s[:i+j] + ":…"
		}
	}
	return s
}

// Validate reports a malformed credential without echoing its source.
func (c Credential) Validate() error {
	if err := ValidateHostPattern(c.Host); err != nil {
		return Errorf(ErrInvalid, "credential for %q: %v", c.Host, err)
	}
	if c.PathPrefix != "" && (!strings.HasPrefix(c.PathPrefix, "/") || strings.ContainsAny(c.PathPrefix, "?#* \t")) {
		return Errorf(ErrInvalid, "credential for %s: path prefix %q must start with / and hold no query, glob or space", c.Host, c.PathPrefix)
	}
	switch c.Kind {
	case CredBearer, CredBasic:
		if c.Name != "" {
			return Errorf(ErrInvalid, "credential for %s: %s takes no name", c.Host, c.Kind)
		}
	case CredHeader:
		if c.Name == "" || strings.ContainsAny(c.Name, " :\r\n\t") {
			return Errorf(ErrInvalid, "credential for %s: header name %q is not a header name", c.Host, c.Name)
		}
	case CredPlaceholder:
		if !validEnvName(c.Name) {
			return Errorf(ErrInvalid, "credential for %s: %q is not an environment variable name", c.Host, c.Name)
		}
	default:
		return Errorf(ErrInvalid, "credential for %s: kind %q is not bearer, basic, header:NAME or placeholder:ENVVAR", c.Host, c.Kind)
	}
	src, arg, _ := strings.Cut(c.Source, ":")
	switch {
	case src != "env" && src != "file" && src != "cmd":
		return Errorf(ErrInvalid, "credential for %s: source %q is not env:NAME, file:PATH or cmd:COMMAND", c.Host, src)
	case arg == "":
		return Errorf(ErrInvalid, "credential for %s: source %s: names nothing", c.Host, src)
	case src == "env" && !validEnvName(arg):
		return Errorf(ErrInvalid, "credential for %s: %q is not an environment variable name", c.Host, arg)
	}
	return nil
}

func validEnvName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for _, c := range s {
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
