// Package artifact promotes outputs out of a sandbox: the files an agent
// wrote in its workspace leave it only after every declared rule passes
// (glob, size, content type sniffed from the bytes, no links or special
// files, an optional JSON schema and an optional validation command run in
// the sandbox). Passing files are copied atomically into a destination
// directory with agentbox-provenance.json beside them; a failing rule
// promotes nothing and the error says which file broke which rule.
package artifact

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/agentbox/agentbox/internal/bytesize"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
)

// Rules are what promotion checks.
type Rules struct {
	// Outputs are the files that may leave the sandbox. A workspace file
	// no output matches is not promoted.
	Outputs []Output `yaml:"outputs" json:"outputs"`

	dir string // where relative json_schema paths resolve
}

// Output is one rule: the files matching Glob, and what each must satisfy.
type Output struct {
	// Glob is a workspace-relative pattern; "*" and "?" stay within one
	// path component, "**" spans any number of them.
	Glob string `yaml:"glob" json:"glob"`
	// Required outputs fail the promotion when nothing matches.
	Required bool `yaml:"required,omitempty" json:"required,omitempty"`
	// MaxSize caps each matching file ("1MiB", "500KB", "1024").
	MaxSize Size `yaml:"max_size,omitempty" json:"max_size,omitempty"`
	// Types lists the allowed content types, detected from the bytes
	// ("text/markdown", "application/json", "text/csv", "text/plain",
	// "image/png", "application/pdf", or "type/*").
	Types []string `yaml:"types,omitempty" json:"types,omitempty"`
	// JSONSchema is a JSON schema file (relative to the rules file) that
	// each matching file must satisfy.
	JSONSchema string `yaml:"json_schema,omitempty" json:"json_schema,omitempty"`
	// Validate is a shell command run in a sandbox for each matching file;
	// it must exit 0. It runs on the staged copy, in a fresh session that
	// holds the staged outputs (PromoteOptions.NewSession); the copy's
	// sandbox path is $1 and $ARTIFACT. Without a session to run it in,
	// the rule fails.
	Validate string `yaml:"validate,omitempty" json:"validate,omitempty"`

	glob   *glob
	schema *jsonschema.Schema
}

// Size is a byte count written with an optional unit, as bytesize.Parse
// reads it: K, M, G, KiB, MiB, GiB (powers of 1024), KB, MB, GB (powers
// of 1000), or a bare number of bytes.
type Size int64

// ParseSize reads "1MiB", "1.5 GB", "512" (bytes).
func ParseSize(s string) (Size, error) {
	v, err := bytesize.Parse(s)
	if err != nil {
		return 0, fmt.Errorf("size %q is not a byte count such as \"1MiB\" or \"500KB\"", s)
	}
	return Size(v), nil
}

// String writes the size in the largest binary unit that keeps it exact.
func (s Size) String() string {
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if s >= Size(u.mult) && int64(s)%u.mult == 0 {
			return fmt.Sprintf("%d%s", int64(s)/u.mult, u.suffix)
		}
	}
	return fmt.Sprintf("%dB", int64(s))
}

// UnmarshalYAML reads a size string or a plain number of bytes.
func (s *Size) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseSize(n.Value)
	if err != nil || n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: max_size %q is not a byte count such as \"1MiB\"", n.Line, n.Value)
	}
	*s = v
	return nil
}

// UnmarshalJSON reads a size string or a plain number of bytes.
func (s *Size) UnmarshalJSON(b []byte) error {
	var str string
	if err := json.Unmarshal(b, &str); err != nil {
		str = string(b)
	}
	v, err := ParseSize(str)
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// MarshalJSON writes the size as a string.
func (s Size) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// LoadRules reads a rules file (JSON when it ends in .json, YAML
// otherwise), strictly: unknown keys are errors with line numbers. JSON
// schemas are compiled now, relative to the file's directory.
func LoadRules(file string) (*Rules, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, sandbox.Wrap("artifact: read rules "+file, sandbox.ErrNotFound, err)
	}
	r, err := ParseRules(data, strings.EqualFold(filepath.Ext(file), ".json"), filepath.Dir(file))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return r, nil
}

// ParseRules decodes rules from YAML (or JSON when isJSON), resolving
// json_schema paths under dir, and checks them.
func ParseRules(data []byte, isJSON bool, dir string) (*Rules, error) {
	var r Rules
	if isJSON {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			return nil, sandbox.Errorf(sandbox.ErrInvalid, "artifact rules: %w", err)
		}
	} else {
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		if err := dec.Decode(&r); err != nil && !errors.Is(err, io.EOF) {
			return nil, sandbox.Errorf(sandbox.ErrInvalid, "artifact rules: %s", strings.ReplaceAll(strings.TrimPrefix(err.Error(), "yaml: "), "\n ", ""))
		}
	}
	r.dir = dir
	if err := r.Compile(); err != nil {
		return nil, err
	}
	return &r, nil
}

// Compile checks the rules and prepares their globs and schemas; Promote
// calls it on rules built in Go. Every problem is reported.
func (r *Rules) Compile() error {
	var errs []error
	if len(r.Outputs) == 0 {
		errs = append(errs, errors.New("no outputs declared: nothing could be promoted"))
	}
	for i := range r.Outputs {
		o := &r.Outputs[i]
		where := fmt.Sprintf("outputs[%d] (%q)", i, o.Glob)
		g, err := compileGlob(o.Glob)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
		}
		o.glob = g
		for _, t := range o.Types {
			if !strings.Contains(t, "/") {
				errs = append(errs, fmt.Errorf("%s: type %q is not a media type such as text/markdown", where, t))
			}
		}
		if o.MaxSize < 0 {
			errs = append(errs, fmt.Errorf("%s: max_size is negative", where))
		}
		if o.JSONSchema != "" && o.schema == nil {
			p := o.JSONSchema
			if !filepath.IsAbs(p) && r.dir != "" {
				p = filepath.Join(r.dir, p)
			}
			sch, err := compileSchema(p)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: json_schema %s: %w", where, o.JSONSchema, err))
			}
			o.schema = sch
		}
	}
	if len(errs) > 0 {
		return sandbox.Errorf(sandbox.ErrInvalid, "artifact rules: %w", errors.Join(errs...))
	}
	return nil
}

// compileSchema compiles a schema file; the compiler's default loader
// reads local files only, so a $ref never reaches the network.
func compileSchema(file string) (*jsonschema.Schema, error) {
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	return c.Compile(abs)
}

// mayContain reports whether some output's glob could match a path below
// the workspace directory dir.
func (r *Rules) mayContain(dir string) bool {
	parts := strings.Split(dir, "/")
	for i := range r.Outputs {
		if g := r.Outputs[i].glob; g != nil && g.mayContain(parts) {
			return true
		}
	}
	return false
}

// glob is a compiled Output.Glob.
type glob struct{ parts []string }

func compileGlob(p string) (*glob, error) {
	switch {
	case p == "":
		return nil, errors.New("glob is empty")
	case path.IsAbs(p):
		return nil, errors.New("glob must be workspace-relative, not absolute")
	case path.Clean(p) != p:
		return nil, fmt.Errorf("glob is not clean (write %q)", path.Clean(p))
	}
	parts := strings.Split(p, "/")
	for _, s := range parts {
		if s == ".." {
			return nil, errors.New("glob has a \"..\" component")
		}
		if s == "**" {
			continue
		}
		if strings.Contains(s, "**") {
			return nil, fmt.Errorf("%q: ** must be a whole path component", s)
		}
		if _, err := path.Match(s, ""); err != nil {
			return nil, fmt.Errorf("%q: %w", s, err)
		}
	}
	return &glob{parts: parts}, nil
}

// match reports whether the slash-separated relative path p matches.
func (g *glob) match(p string) bool { return matchParts(g.parts, strings.Split(p, "/")) }

// mayContain reports whether a path below the directory dir (split in
// components) could match.
func (g *glob) mayContain(dir []string) bool {
	pat := g.parts
	for _, d := range dir {
		if len(pat) == 0 {
			return false
		}
		if pat[0] == "**" {
			return true
		}
		if ok, _ := path.Match(pat[0], d); !ok {
			return false
		}
		pat = pat[1:]
	}
	return len(pat) > 0
}

func matchParts(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for i := 0; i <= len(name); i++ {
				if matchParts(pat[1:], name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], name[0]); !ok {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(name) == 0
}
