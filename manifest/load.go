package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/agentbox/agentbox/sandbox"
	"go.yaml.in/yaml/v3"
)

// Load reads a manifest file: JSON when its name ends in .json, YAML
// otherwise. Unknown keys are errors, not ignored.
func Load(path string) (*Manifest, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, sandbox.Wrap("manifest: read "+path, sandbox.ErrNotFound, err)
	}
	if strings.EqualFold(filepath.Ext(path), ".json") {
		m, err := ParseJSON(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return m, nil
	}
	m, err := ParseYAML(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// ParseYAML decodes a YAML manifest strictly: unknown keys, duplicate keys
// and malformed YAML are errors that carry their line numbers.
func ParseYAML(data []byte) (*Manifest, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		if errors.Is(err, io.EOF) {
			return &m, nil // an empty document is an empty manifest
		}
		var te *yaml.TypeError
		if errors.As(err, &te) {
			// One line per problem, each already "line N: ...".
			msgs := make([]string, len(te.Errors))
			for i, e := range te.Errors {
				e = unknownField.ReplaceAllString(strings.TrimPrefix(e, "yaml: "), `unknown key "$1" (in $2)`)
				msgs[i] = "manifest: " + e
			}
			return nil, sandbox.Errorf(sandbox.ErrInvalid, "%s", strings.Join(msgs, "\n"))
		}
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "manifest: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "manifest: line %d: more than one YAML document", extra.Line)
	}
	return &m, nil
}

// unknownField rewrites yaml's "field x not found in type manifest.File".
var unknownField = regexp.MustCompile(`field (\S+) not found in type manifest\.(\w+)`)

// jsonUnknown matches encoding/json's unknown-field error.
var jsonUnknown = regexp.MustCompile(`unknown field "([^"]*)"`)

// ParseJSON decodes a JSON manifest strictly: unknown keys and trailing
// data are errors; syntax errors carry their line and column.
func ParseJSON(data []byte) (*Manifest, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		pos := jsonPos(data, err)
		if sm := jsonUnknown.FindStringSubmatch(err.Error()); pos == "" && sm != nil {
			// Unknown-field errors carry no offset: point at the key's
			// first occurrence.
			key := regexp.MustCompile(regexp.QuoteMeta(`"`+sm[1]+`"`) + `\s*:`)
			if loc := key.FindIndex(data); loc != nil {
				pos = jsonPos(data, nil, int64(loc[0]))
			}
		}
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "manifest: %s%s", pos, strings.TrimPrefix(err.Error(), "json: "))
	}
	if dec.More() {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "manifest: %sunexpected data after the manifest", jsonPos(data, nil, dec.InputOffset()))
	}
	return &m, nil
}

// jsonPos turns a decoder error's byte offset (or an explicit one) into a
// "line L, column C: " prefix; "" when the error carries no offset.
func jsonPos(data []byte, err error, offset ...int64) string {
	off := int64(-1)
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case len(offset) > 0:
		off = offset[0]
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
	}
	if off < 0 || off > int64(len(data)) {
		return ""
	}
	before := data[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	col := int(off) - bytes.LastIndexByte(before, '\n')
	return fmt.Sprintf("line %d, column %d: ", line, col)
}
