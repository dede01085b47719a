package manifest

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Mode is a file's permission bits, written in octal ("0644" or 0644 in
// YAML, "0644" in JSON). Zero means the entry kind's default.
type Mode uint32

// Perm is the mode as fs.FileMode permission bits.
func (m Mode) Perm() fs.FileMode { return fs.FileMode(m) }

// String is the mode in 4-digit octal.
func (m Mode) String() string { return fmt.Sprintf("%04o", uint32(m)) }

// parseMode reads an octal mode such as "0644", "644" or "0o644".
func parseMode(s string) (Mode, error) {
	t := strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(s), "0o"), "0O")
	v, err := strconv.ParseUint(t, 8, 32)
	if err != nil || t == "" {
		return 0, fmt.Errorf("mode %q is not an octal number such as \"0644\"", s)
	}
	if v == 0 {
		return 0, fmt.Errorf("mode %q leaves no permission at all; omit mode for the default", s)
	}
	return Mode(v), nil
}

// UnmarshalYAML accepts 0644 (YAML reads it as octal) or "0644".
func (m *Mode) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: mode must be an octal number such as \"0644\"", n.Line)
	}
	// Take the literal text, so both 0644 and "0644" mean octal 644.
	v, err := parseMode(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*m = v
	return nil
}

// MarshalYAML writes the mode as an octal string.
func (m Mode) MarshalYAML() (any, error) { return m.String(), nil }

// UnmarshalJSON accepts an octal string ("0644"); JSON has no octal
// numbers and a decimal 420 is too easy to get wrong, so numbers are
// refused.
func (m *Mode) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("mode must be an octal string such as \"0644\", not %s", b)
	}
	v, err := parseMode(s)
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// MarshalJSON writes the mode as an octal string.
func (m Mode) MarshalJSON() ([]byte, error) { return json.Marshal(m.String()) }

// Duration is a time.Duration written as "30s" or "2m".
type Duration time.Duration

// UnmarshalYAML reads a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil || n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: timeout %q is not a duration such as \"90s\"", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration as a string.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("timeout must be a duration string such as \"90s\", not %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("timeout %q is not a duration such as \"90s\"", s)
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }
