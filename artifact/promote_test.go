package artifact

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const goodJSON = `{"items": [{"account": "4000", "amount": 12.5}]}`

// workspace makes a host workspace with the files given (path -> content)
// and returns its directory.
func workspace(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ws")
	for p, c := range files {
		full := filepath.Join(dir, p)
		must(t, os.MkdirAll(filepath.Dir(full), 0o755))
		must(t, os.WriteFile(full, []byte(c), 0o644))
	}
	must(t, os.MkdirAll(dir, 0o755))
	return dir
}

func pngBytes(t *testing.T) string {
	t.Helper()
	var b bytes.Buffer
	must(t, png.Encode(&b, image.NewRGBA(image.Rect(0, 0, 2, 2))))
	return b.String()
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func promoteDir(t *testing.T, ws string, rules *Rules, dest string, opts PromoteOptions) (*Record, error) {
	t.Helper()
	src, err := NewDirSource(ws)
	must(t, err)
	return Promote(context.Background(), src, rules, dest, opts)
}

func TestPromoteCopiesPassingOutputsWithProvenance(t *testing.T) {
	ws := workspace(t, map[string]string{
		"out/report.md":         "# Reconciliation\n\nAll 3 statements match.\n",
		"out/data/summary.json": goodJSON,
		"out/chart.png":         pngBytes(t),
		"scratch/notes.txt":     "not an output",
	})
	rules, err := LoadRules("testdata/rules.yaml")
	must(t, err)
	dest := filepath.Join(t.TempDir(), "promoted")
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	rec, err := promoteDir(t, ws, rules, dest, PromoteOptions{RunID: "run-1", TraceID: "trace-1", Now: func() time.Time { return now }})
	must(t, err)

	want := map[string]string{"out/report.md": "text/markdown", "out/data/summary.json": "application/json", "out/chart.png": "image/png"}
	if len(rec.Files) != len(want) {
		t.Fatalf("promoted %d files, want %d: %+v", len(rec.Files), len(want), rec.Files)
	}
	for _, f := range rec.Files {
		data, err := os.ReadFile(filepath.Join(dest, f.Path))
		must(t, err)
		sum := sha256.Sum256(data)
		if f.SHA256 != hex.EncodeToString(sum[:]) || f.Size != int64(len(data)) {
			t.Errorf("%s: record says sha256 %s size %d, file has %x size %d", f.Path, f.SHA256, f.Size, sum, len(data))
		}
		if f.Type != want[f.Path] {
			t.Errorf("%s: type %s, want %s", f.Path, f.Type, want[f.Path])
		}
		if f.SourcePath != filepath.Join(ws, f.Path) {
			t.Errorf("%s: source path %s", f.Path, f.SourcePath)
		}
		if len(f.Checks) < 3 {
			t.Errorf("%s: only %d checks recorded: %+v", f.Path, len(f.Checks), f.Checks)
		}
	}
	if _, err := os.Stat(filepath.Join(dest, "scratch/notes.txt")); !os.IsNotExist(err) {
		t.Error("a file no rule matches was promoted")
	}
	var onDisk Record
	data, err := os.ReadFile(filepath.Join(dest, RecordName))
	must(t, err)
	must(t, json.Unmarshal(data, &onDisk))
	if onDisk.RunID != "run-1" || onDisk.TraceID != "trace-1" || !onDisk.Time.Equal(now) || onDisk.AgentboxVersion == "" || onDisk.Version != RecordVersion || !strings.HasPrefix(onDisk.Source, "dir:") {
		t.Errorf("record header = %+v", onDisk)
	}
	if len(onDisk.Files) != 3 {
		t.Errorf("record on disk lists %d files", len(onDisk.Files))
	}
	assertNoStaging(t, filepath.Dir(dest))
}

func TestPromoteIntoAnExistingDirectory(t *testing.T) {
	ws := workspace(t, map[string]string{"out/report.md": "ok\n"})
	rules := &Rules{Outputs: []Output{{Glob: "out/*.md", Types: []string{"text/markdown"}}}}
	dest := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dest, "keep.txt"), []byte("mine"), 0o644))
	_, err := promoteDir(t, ws, rules, dest, PromoteOptions{})
	must(t, err)
	for _, p := range []string{"keep.txt", "out/report.md", RecordName} {
		if _, err := os.Stat(filepath.Join(dest, p)); err != nil {
			t.Errorf("%s missing after promotion into an existing dir: %v", p, err)
		}
	}
	// A second promotion would overwrite: refused, nothing changes.
	_, err = promoteDir(t, ws, rules, dest, PromoteOptions{})
	if err == nil || !strings.Contains(err.Error(), "already has out/report.md") {
		t.Fatalf("second promotion = %v, want a refusal naming the clash", err)
	}
	assertNoStaging(t, dest)
}

func TestPromoteRefuses(t *testing.T) {
	host := t.TempDir()
	hostSecret := filepath.Join(host, "secret.txt")
	must(t, os.WriteFile(hostSecret, []byte("host secret\n"), 0o600))
	md := []Output{{Glob: "out/*.md", Types: []string{"text/markdown"}}}

	tests := []struct {
		name  string
		files map[string]string
		plant func(t *testing.T, ws string)
		rules []Output
		want  []string
	}{
		{
			name:  "a planted symlink to a host file",
			plant: func(t *testing.T, ws string) { must(t, os.Symlink(hostSecret, filepath.Join(ws, "out/report.md"))) },
			rules: md,
			want:  []string{"out/report.md", `rule "out/*.md"`, "regular_file", "is a symlink", "links are never promoted"},
		},
		{
			name:  "a hard link to a host file",
			plant: func(t *testing.T, ws string) { must(t, os.Link(hostSecret, filepath.Join(ws, "out/report.md"))) },
			rules: md,
			want:  []string{"out/report.md", "hard_links", "has 2 hard links"},
		},
		{
			name:  "a fifo",
			plant: func(t *testing.T, ws string) { must(t, syscall.Mkfifo(filepath.Join(ws, "out/report.md"), 0o644)) },
			rules: md,
			want:  []string{"is a fifo"},
		},
		{
			name:  "an oversized file",
			files: map[string]string{"out/big.txt": strings.Repeat("x", 2048)},
			rules: []Output{{Glob: "out/*.txt", MaxSize: 1024}},
			want:  []string{"out/big.txt", "max_size", "2048 bytes, over the limit of 1KiB"},
		},
		{
			name:  "a .md that holds binary",
			files: map[string]string{"out/report.md": "# title\n\x00\x01\x02\xff binary"},
			rules: md,
			want:  []string{"out/report.md", "types", "content is application/octet-stream", "NUL bytes", "allowed: text/markdown"},
		},
		{
			name:  "an ELF renamed to .json",
			files: map[string]string{"out/data.json": "\x7fELF\x02\x01\x01\x00" + strings.Repeat("\x00", 56)},
			rules: []Output{{Glob: "out/*.json", Types: []string{"application/json"}}},
			want:  []string{"out/data.json", "content is application/x-executable", "ELF"},
		},
		{
			name:  "text that is not JSON in a .json",
			files: map[string]string{"out/data.json": "{not json"},
			rules: []Output{{Glob: "out/*.json", Types: []string{"application/json"}}},
			want:  []string{"content is text/plain", "allowed: application/json"},
		},
		{
			name:  "JSON that breaks its schema, with the JSON pointer",
			files: map[string]string{"out/data.json": `{"items": [{"account": "4000", "amount": "twelve"}]}`},
			rules: []Output{{Glob: "out/*.json", JSONSchema: "testdata/report.schema.json"}},
			want:  []string{"json_schema", `at "/items/0/amount"`, "want number"},
		},
		{
			name:  "a required output that is missing",
			files: map[string]string{"out/other.txt": "x"},
			rules: []Output{{Glob: "out/report.md", Required: true}},
			want:  []string{`rule "out/report.md": required: no file in the workspace matches`},
		},
		{
			name:  "a validate command with no session to run it",
			files: map[string]string{"out/report.md": "ok\n"},
			rules: []Output{{Glob: "out/*.md", Validate: "true"}},
			want:  []string{"validate", `command "true" was not run`, "an unchecked rule does not pass"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := tt.files
			if files == nil {
				files = map[string]string{"out/.keep": ""}
			}
			ws := workspace(t, files)
			if tt.plant != nil {
				tt.plant(t, ws)
			}
			rules := &Rules{Outputs: tt.rules}
			destParent := t.TempDir()
			dest := filepath.Join(destParent, "promoted")
			_, err := promoteDir(t, ws, rules, dest, PromoteOptions{})
			var re *RejectedError
			if !errors.As(err, &re) || !errors.Is(err, ErrRejected) {
				t.Fatalf("Promote = %v, want a *RejectedError", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%s", w, err)
				}
			}
			if _, err := os.Stat(dest); !os.IsNotExist(err) {
				t.Errorf("destination exists after a refusal (stat: %v)", err)
			}
			assertNoStaging(t, destParent)
		})
	}
}

func TestAFailingFilePromotesNothingAndEveryFailureIsListed(t *testing.T) {
	ws := workspace(t, map[string]string{
		"out/good.md":  "fine\n",
		"out/bad.md":   "\x00binary",
		"out/huge.md":  strings.Repeat("y", 5000),
		"out/good2.md": "also fine\n",
	})
	rules := &Rules{Outputs: []Output{{Glob: "out/*.md", MaxSize: 4096, Types: []string{"text/markdown"}}}}
	dest := t.TempDir() // exists, and holds one file of the user's
	must(t, os.WriteFile(filepath.Join(dest, "before.txt"), []byte("before"), 0o644))
	_, err := promoteDir(t, ws, rules, dest, PromoteOptions{})
	var re *RejectedError
	if !errors.As(err, &re) {
		t.Fatalf("Promote = %v", err)
	}
	if len(re.Violations) != 2 {
		t.Errorf("got %d violations, want 2 (bad.md, huge.md):\n%v", len(re.Violations), err)
	}
	entries, _ := os.ReadDir(dest)
	if len(entries) != 1 || entries[0].Name() != "before.txt" {
		t.Errorf("destination holds %v after the refusal, want only before.txt", entries)
	}
	assertNoStaging(t, filepath.Dir(dest))
}

// swapSource lists honestly, then swaps a file for a link before the copy
// opens it: the tampering a racing sandboxed process would attempt.
type swapSource struct {
	*DirSource
	swap func()
}

func (s swapSource) List(ctx context.Context, descend func(string) bool) ([]Entry, error) {
	e, err := s.DirSource.List(ctx, descend)
	s.swap()
	return e, err
}

func TestPromoteRefusesAFileSwappedForALinkAfterListing(t *testing.T) {
	host := t.TempDir()
	must(t, os.WriteFile(filepath.Join(host, "secret.txt"), []byte("host secret\n"), 0o600))
	tests := []struct {
		name string
		swap func(ws string)
	}{
		{"the file itself", func(ws string) {
			must(t, os.Remove(filepath.Join(ws, "out/report.md")))
			must(t, os.Symlink(filepath.Join(host, "secret.txt"), filepath.Join(ws, "out/report.md")))
		}},
		{"its parent directory", func(ws string) {
			must(t, os.Rename(filepath.Join(ws, "out"), filepath.Join(ws, "out.old")))
			must(t, os.WriteFile(filepath.Join(host, "report.md"), []byte("host file\n"), 0o644))
			must(t, os.Symlink(host, filepath.Join(ws, "out")))
		}},
		{"a hard link", func(ws string) {
			must(t, os.Remove(filepath.Join(ws, "out/report.md")))
			must(t, os.Link(filepath.Join(host, "secret.txt"), filepath.Join(ws, "out/report.md")))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := workspace(t, map[string]string{"out/report.md": "honest\n"})
			ds, err := NewDirSource(ws)
			must(t, err)
			dest := filepath.Join(t.TempDir(), "promoted")
			rules := &Rules{Outputs: []Output{{Glob: "out/*.md"}}}
			_, err = Promote(context.Background(), swapSource{ds, func() { tt.swap(ws) }}, rules, dest, PromoteOptions{})
			if err == nil {
				t.Fatal("Promote copied a file swapped after listing")
			}
			t.Logf("refused: %v", err)
			if _, err := os.Stat(dest); !os.IsNotExist(err) {
				t.Error("destination exists after the refusal")
			}
		})
	}
}

func TestPromoteFromASessionRunsValidateCommands(t *testing.T) {
	ws := workspace(t, map[string]string{
		"out/report.md": "Total: 42\n",
		"out/empty.md":  "no total here\n",
	})
	s := &hostSession{dir: ws}
	rules := &Rules{Outputs: []Output{{Glob: "out/*.md", Validate: `grep -q Total "$1" || { echo "no Total in $ARTIFACT" >&2; exit 3; }`}}}
	fresh := &freshSessions{t: t}
	_, err := Promote(context.Background(), NewSessionSource(s), rules, filepath.Join(t.TempDir(), "d"), PromoteOptions{NewSession: fresh.new})
	if len(fresh.made) != 1 || !fresh.made[0].closed {
		t.Fatalf("want one validation session, closed; got %d", len(fresh.made))
	}
	if s.execs > 1 {
		t.Errorf("%d commands ran in the agent's session; want at most the stat of the listing", s.execs)
	}
	vdir := fresh.made[0].dir
	if err == nil || !strings.Contains(err.Error(), "out/empty.md") || !strings.Contains(err.Error(), "exited 3: no Total in "+vdir+"/out/empty.md") {
		t.Fatalf("Promote = %v, want out/empty.md failing its validate command, run on the copy in the validation session", err)
	}
	if strings.Contains(err.Error(), "out/report.md") {
		t.Errorf("the passing file is listed as a violation:\n%v", err)
	}

	must(t, os.Remove(filepath.Join(ws, "out/empty.md")))
	dest := filepath.Join(t.TempDir(), "d")
	rec, err := Promote(context.Background(), NewSessionSource(s), rules, dest, PromoteOptions{NewSession: (&freshSessions{t: t}).new, RunID: "r"})
	must(t, err)
	if len(rec.Files) != 1 || rec.Files[0].SourcePath != ws+"/out/report.md" || !strings.HasPrefix(rec.Source, "session:test/") {
		t.Errorf("record = %+v", rec)
	}
	var sawValidate bool
	for _, c := range rec.Files[0].Checks {
		sawValidate = sawValidate || c.Name == "validate" && c.OK
	}
	if !sawValidate {
		t.Errorf("no passing validate check recorded: %+v", rec.Files[0].Checks)
	}
}

func TestSessionSourceDetectsHardLinksThroughStat(t *testing.T) {
	ws := workspace(t, map[string]string{"out/a.md": "a\n"})
	must(t, os.Link(filepath.Join(ws, "out/a.md"), filepath.Join(ws, "out/b.md")))
	s := &hostSession{dir: ws}
	_, err := Promote(context.Background(), NewSessionSource(s), &Rules{Outputs: []Output{{Glob: "out/*.md"}}}, filepath.Join(t.TempDir(), "d"), PromoteOptions{})
	if err == nil || !strings.Contains(err.Error(), "has 2 hard links") {
		t.Fatalf("Promote = %v, want both hard links refused", err)
	}
}

func assertNoStaging(t *testing.T, dir string) {
	t.Helper()
	matches, _ := filepath.Glob(filepath.Join(dir, ".agentbox-promote-*"))
	if len(matches) > 0 {
		t.Errorf("staging left behind: %v", matches)
	}
}
