package manifest

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/sandbox"
	"go.yaml.in/yaml/v3"
)

func TestLoadReportsBadInputWithLineNumbers(t *testing.T) {
	tests := []struct {
		name string
		file string
		want []string
	}{
		{"an unknown key is rejected with its line", "unknown_key.yaml", []string{"line 5", "mdoe"}},
		{"malformed YAML names its line", "malformed.yaml", []string{"line "}},
		{"a duplicate key is rejected with both lines", "duplicate_key.yaml", []string{"line 4", "a.txt", "line 2"}},
		{"a mode that is not octal names its line", "bad_mode.yaml", []string{"line 5", "rwxr-xr-x"}},
		{"an unknown JSON key is rejected with its line", "unknown_key.json", []string{"line 3", "owner"}},
		{"malformed JSON names its line", "malformed.json", []string{"line 3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(filepath.Join("testdata", tt.file))
			if err == nil {
				t.Fatal("Load succeeded, want an error")
			}
			if !errors.Is(err, sandbox.ErrInvalid) {
				t.Errorf("error %q is not ErrInvalid", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestLoadReadsEveryField(t *testing.T) {
	m, err := Load("testdata/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Entries["README.md"].File.Mode; got != 0o644 {
		t.Errorf("README.md mode = %s, want 0644 (YAML 0644 is octal)", got)
	}
	if got := m.Entries["run.sh"].File.Mode; got != 0o755 {
		t.Errorf("run.sh mode = %s, want 0755", got)
	}
	if d := m.Entries["docs"].Dir; d == nil || d.Mode != 0o750 || d.Children["notes.txt"].File == nil {
		t.Errorf("docs = %+v, want a 0750 dir with notes.txt", d)
	}
	if m.Entries["out"].Dir == nil {
		t.Error("out: want an empty dir entry")
	}
	if mt := m.Entries["data"].Mount; mt == nil || !mt.IsReadOnly() {
		t.Errorf("data mount = %+v, want read-only by default", mt)
	}
	if m.RunAs != "agent" || len(m.Users) != 1 || m.Users[0].UID != 1500 || m.Env["TZ"] != "UTC" {
		t.Errorf("users/run_as/env = %+v %q %v", m.Users, m.RunAs, m.Env)
	}

	j, err := Load("testdata/full.json")
	if err != nil {
		t.Fatal(err)
	}
	if got := j.Entries["README.md"].File.Mode; got != 0o600 {
		t.Errorf("JSON mode = %s, want 0600", got)
	}
}

func TestAnEmptyDocumentIsAnEmptyManifest(t *testing.T) {
	m, err := ParseYAML([]byte("# nothing\n"))
	if err != nil || len(m.Entries) != 0 {
		t.Fatalf("ParseYAML(empty) = %+v, %v", m, err)
	}
}

func TestAManifestSurvivesARoundTrip(t *testing.T) {
	m := mustLoad(t, "testdata/full.yaml")
	m.Entries["repo"] = Entry{GitRepo: &GitRepo{URL: "https://example.com/r.git", Ref: "main", Timeout: Duration(90 * time.Second)}}
	j, err := json.Marshal(m)
	must(t, err)
	fromJSON, err := ParseJSON(j)
	must(t, err)
	if !reflect.DeepEqual(*fromJSON, m) {
		t.Errorf("JSON round trip changed the manifest:\n%s", j)
	}
	y, err := yaml.Marshal(m)
	must(t, err)
	fromYAML, err := ParseYAML(y)
	must(t, err)
	if !reflect.DeepEqual(*fromYAML, m) {
		t.Errorf("YAML round trip changed the manifest:\n%s", y)
	}
}
