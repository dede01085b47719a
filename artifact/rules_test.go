package artifact

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/sandbox"
)

func TestLoadRules(t *testing.T) {
	r, err := LoadRules("testdata/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Outputs) != 3 || !r.Outputs[0].Required || r.Outputs[0].MaxSize != 1<<20 || r.Outputs[1].schema == nil {
		t.Fatalf("rules = %+v", r.Outputs)
	}
	j, err := LoadRules("testdata/rules.json")
	if err != nil {
		t.Fatal(err)
	}
	if j.Outputs[0].MaxSize != 10_000 {
		t.Errorf("JSON max_size = %d, want 10000", j.Outputs[0].MaxSize)
	}
}

func TestLoadRulesRejects(t *testing.T) {
	tests := []struct {
		name string
		file string
		want []string
	}{
		{"an unknown key, with its line", "testdata/unknown_key.yaml", []string{"line 3", "max-size"}},
		{"every bad glob and type at once", "testdata/bad_rules.yaml", []string{"outputs[0]", "absolute", "outputs[1]", "syntax error", `type "markdown"`, "outputs[2]", `".."`}},
		{"a missing file", "testdata/nope.yaml", []string{"nope.yaml"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadRules(tt.file)
			if err == nil {
				t.Fatal("LoadRules succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	if _, err := ParseRules([]byte("outputs:\n  - glob: a\n    max_size: lots\n"), false, ""); !errors.Is(err, sandbox.ErrInvalid) || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("bad max_size: %v, want ErrInvalid at line 3", err)
	}
	if _, err := ParseRules([]byte("outputs: []\n"), false, ""); err == nil {
		t.Error("rules with no outputs were accepted")
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want Size
	}{
		{"1024", 1024}, {"1MiB", 1 << 20}, {"1.5 KiB", 1536}, {"500KB", 500_000}, {"2GB", 2e9}, {"10B", 10}, {"3M", 3 << 20},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "MiB", "-1", "1 parsec"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) succeeded", bad)
		}
	}
}

func TestGlobMatches(t *testing.T) {
	tests := []struct {
		glob, path string
		want       bool
	}{
		{"out/*.md", "out/report.md", true},
		{"out/*.md", "out/sub/report.md", false},
		{"out/**/*.md", "out/report.md", true},
		{"out/**/*.md", "out/a/b/report.md", true},
		{"**", "anything/at/all", true},
		{"**/*.json", "x.json", true},
		{"out/**", "out", true}, // ** may be zero components; dirs are never promoted anyway
		{"out/?.csv", "out/a.csv", true},
		{"out/?.csv", "out/ab.csv", false},
	}
	for _, tt := range tests {
		g, err := compileGlob(tt.glob)
		if err != nil {
			t.Fatal(err)
		}
		if got := g.match(tt.path); got != tt.want {
			t.Errorf("%q matches %q = %v, want %v", tt.glob, tt.path, got, tt.want)
		}
	}
}

func TestGlobPrunesDirectoriesItCannotMatch(t *testing.T) {
	tests := []struct {
		glob, dir string
		want      bool
	}{
		{"out/*.md", "out", true},
		{"out/*.md", "data", false},
		{"out/*.md", "out/sub", false},
		{"out/**/*.md", "out/a/b", true},
		{"**/*.md", "anything", true},
		{"o*/x/*.csv", "outputs/x", true},
		{"o*/x/*.csv", "outputs/y", false},
	}
	for _, tt := range tests {
		g, err := compileGlob(tt.glob)
		if err != nil {
			t.Fatal(err)
		}
		if got := g.mayContain(strings.Split(tt.dir, "/")); got != tt.want {
			t.Errorf("%q may match below %q = %v, want %v", tt.glob, tt.dir, got, tt.want)
		}
	}
}
