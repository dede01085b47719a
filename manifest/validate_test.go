package manifest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/sandbox"
)

func TestValidateRejects(t *testing.T) {
	f := newFixture(t)
	file := Entry{File: &File{Content: "x"}}
	tests := []struct {
		name      string
		m         Manifest
		untrusted bool
		want      []string // substrings of the one problem expected
		kind      error
	}{
		{
			name: "an absolute destination",
			m:    Manifest{Entries: map[string]Entry{"/etc/passwd": file}},
			want: []string{`entries["/etc/passwd"]`, "absolute"}, kind: sandbox.ErrPathEscape,
		},
		{
			name: "a destination that climbs out with ..",
			m:    Manifest{Entries: map[string]Entry{"a/../../x": file}},
			want: []string{`entries["a/../../x"]`, `".."`}, kind: sandbox.ErrPathEscape,
		},
		{
			name: "a child path with .. inside a dir",
			m:    Manifest{Entries: map[string]Entry{"d": {Dir: &Dir{Children: map[string]Entry{"../x": file}}}}},
			want: []string{`entries["d/../x"]`, `".."`}, kind: sandbox.ErrPathEscape,
		},
		{
			name: "an unclean destination",
			m:    Manifest{Entries: map[string]Entry{"a//b/": file}},
			want: []string{"not clean", `"a/b"`}, kind: sandbox.ErrInvalid,
		},
		{
			name: "two entries for one path",
			m: Manifest{Entries: map[string]Entry{
				"d/x": file, "d": {Dir: &Dir{Children: map[string]Entry{"x": file}}},
			}},
			want: []string{`entries["d/x"]`, "two entries"}, kind: sandbox.ErrInvalid,
		},
		{
			name: "a file inside a mount",
			m: Manifest{Entries: map[string]Entry{
				"data": {Mount: &Mount{Src: "src/mounted"}}, "data/extra.txt": file,
			}},
			want: []string{`entries["data/extra.txt"]`, `inside the mount entry "data"`}, kind: sandbox.ErrInvalid,
		},
		{
			name: "a file inside a local_dir copy",
			m: Manifest{Entries: map[string]Entry{
				"t": {LocalDir: &LocalDir{Src: "src/tree"}}, "t/a.txt": file,
			}},
			want: []string{`entries["t/a.txt"]`, `inside the local_dir entry "t"`}, kind: sandbox.ErrInvalid,
		},
		{
			name: "a host source outside the trusted base without a grant",
			m:    Manifest{Entries: map[string]Entry{"data/x": {LocalFile: &LocalFile{Src: filepath.Join(f.outside, "secret.txt")}}}},
			want: []string{`entries["data/x"]`, "is outside the trusted base " + f.base, "(add a grant)"}, kind: sandbox.ErrPathEscape,
		},
		{
			name: "a relative source that climbs out of the base",
			m:    Manifest{Entries: map[string]Entry{"x": {LocalFile: &LocalFile{Src: "../host/secret.txt"}}}},
			want: []string{"outside the trusted base"}, kind: sandbox.ErrPathEscape,
		},
		{
			name: "a source under the base that is a symlink out of it",
			m: func() Manifest {
				must(t, os.Symlink(filepath.Join(f.outside, "secret.txt"), filepath.Join(f.base, "innocent.txt")))
				return Manifest{Entries: map[string]Entry{"x": {LocalFile: &LocalFile{Src: "innocent.txt"}}}}
			}(),
			want: []string{"resolves to " + filepath.Join(f.outside, "secret.txt"), "outside the trusted base"}, kind: sandbox.ErrPathEscape,
		},
		{
			name:      "grants in an untrusted manifest",
			m:         Manifest{Grants: []Grant{{Path: f.outside, ReadOnly: true}}},
			untrusted: true,
			want:      []string{"grants[0]", "untrusted input cannot grant"}, kind: sandbox.ErrInvalid,
		},
		{
			name:      "a host path outside the base in an untrusted manifest",
			m:         Manifest{Entries: map[string]Entry{"m": {Mount: &Mount{Src: f.outside}}}},
			untrusted: true,
			want:      []string{`entries["m"]`, "untrusted manifest cannot reach host paths"}, kind: sandbox.ErrPathEscape,
		},
		{
			name: "a read-write mount under a read-only grant",
			m: Manifest{
				Grants:  []Grant{{Path: f.outside, ReadOnly: true}},
				Entries: map[string]Entry{"m": {Mount: &Mount{Src: f.outside, ReadOnly: ptr(false)}}},
			},
			want: []string{"read-write mount but grant", "read-only"}, kind: sandbox.ErrInvalid,
		},
		{
			name: "a symlink in a source tree that points outside it",
			m: Manifest{Entries: map[string]Entry{"t": {LocalDir: &LocalDir{Src: f.tree(t, "up", func(d string) {
				must(t, os.Symlink("../../host/secret.txt", filepath.Join(d, "sub/leak")))
			})}}}},
			want: []string{"symlink sub/leak", "points outside the tree"}, kind: sandbox.ErrPathEscape,
		},
		{
			name: "an absolute symlink in a source tree",
			m: Manifest{Entries: map[string]Entry{"t": {LocalDir: &LocalDir{Src: f.tree(t, "abs", func(d string) {
				must(t, os.Symlink("/etc/passwd", filepath.Join(d, "passwd")))
			})}}}},
			want: []string{"symlink passwd", `absolute target "/etc/passwd"`}, kind: sandbox.ErrPathEscape,
		},
		{
			name: "a symlink that looks inside on paper but leaves through another link",
			m: Manifest{Entries: map[string]Entry{"t": {LocalDir: &LocalDir{Src: f.tree(t, "chain", func(d string) {
				must(t, os.Symlink("..", filepath.Join(d, "sub/parent")))        // stays inside: sub/.. is the tree
				must(t, os.Symlink("sub/parent/..", filepath.Join(d, "sneaky"))) // lexically ".", really the tree's parent
			})}}}},
			want: []string{"symlink sneaky", "points outside the tree"}, kind: sandbox.ErrPathEscape,
		},
		{
			name: "a fifo in a source tree",
			m: Manifest{Entries: map[string]Entry{"t": {LocalDir: &LocalDir{Src: f.tree(t, "fifo", func(d string) {
				mkfifo(t, filepath.Join(d, "sub/pipe"))
			})}}}},
			want: []string{"sub/pipe is a fifo"}, kind: sandbox.ErrInvalid,
		},
		{
			name: "a socket in a source tree",
			m: Manifest{Entries: map[string]Entry{"t": {LocalDir: &LocalDir{Src: f.tree(t, "sock", func(d string) {
				mksocket(t, filepath.Join(d, "s.sock"))
			})}}}},
			want: []string{"s.sock is a socket"}, kind: sandbox.ErrInvalid,
		},
		{
			name: "a device as a local_file source",
			m: Manifest{
				Grants:  []Grant{{Path: "/dev/null", ReadOnly: true}},
				Entries: map[string]Entry{"null": {LocalFile: &LocalFile{Src: "/dev/null"}}},
			},
			want: []string{"is a character device, not a regular file"}, kind: sandbox.ErrInvalid,
		},
		{
			name: "a local_dir source that is a file",
			m:    Manifest{Entries: map[string]Entry{"t": {LocalDir: &LocalDir{Src: "src/ledger.csv"}}}},
			want: []string{"is a regular file, not a directory"}, kind: sandbox.ErrInvalid,
		},
		{
			name: "a missing source",
			m:    Manifest{Entries: map[string]Entry{"x": {LocalFile: &LocalFile{Src: "src/nope.csv"}}}},
			want: []string{`local_file src "src/nope.csv"`, "no such file"}, kind: sandbox.ErrNotFound,
		},
		{
			name: "a setuid mode",
			m:    Manifest{Entries: map[string]Entry{"x": {File: &File{Content: "x", Mode: 0o4755}}}},
			want: []string{"mode 4755 is not allowed"}, kind: sandbox.ErrInvalid,
		},
		{
			name: "an unknown run_as user",
			m:    Manifest{Users: []User{{Name: "agent", UID: 1000, GID: 1000}}, RunAs: "root"},
			want: []string{"run_as", `unknown user "root"`}, kind: sandbox.ErrInvalid,
		},
		{
			name: "an entry with no kind",
			m:    Manifest{Entries: map[string]Entry{"x": {}}},
			want: []string{"no kind"}, kind: sandbox.ErrInvalid,
		},
		{
			name: "an entry with two kinds",
			m:    Manifest{Entries: map[string]Entry{"x": {File: &File{}, Dir: &Dir{}}}},
			want: []string{"more than one kind", "file", "dir"}, kind: sandbox.ErrInvalid,
		},
		{
			name: "a git url with a command-running transport",
			m:    Manifest{Entries: map[string]Entry{"r": {GitRepo: &GitRepo{URL: "ext::sh -c touch% /tmp/pwned"}}}},
			want: []string{"transport helper"}, kind: sandbox.ErrInvalid,
		},
		{
			name:      "a plain-http git url in an untrusted manifest",
			m:         Manifest{Entries: map[string]Entry{"r": {GitRepo: &GitRepo{URL: "http://example.com/r.git"}}}},
			untrusted: true,
			want:      []string{"only clone over https"}, kind: sandbox.ErrInvalid,
		},
		{
			name: "a git ref that is an option",
			m:    Manifest{Entries: map[string]Entry{"r": {GitRepo: &GitRepo{URL: "https://example.com/r.git", Ref: "--upload-pack=evil"}}}},
			want: []string{"not a valid branch"}, kind: sandbox.ErrInvalid,
		},
		{
			name: "a relative root",
			m:    Manifest{Root: "workspace"},
			want: []string{"root", "clean absolute"}, kind: sandbox.ErrInvalid,
		},
		{
			name: "a bad environment variable name",
			m:    Manifest{Env: map[string]string{"A=B": "x"}},
			want: []string{`env["A=B"]`}, kind: sandbox.ErrInvalid,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.m.Validate(ValidateOptions{Base: f.base, Trusted: !tt.untrusted})
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Validate = %v, want a *ValidationError", err)
			}
			if len(ve.Problems) != 1 {
				t.Fatalf("got %d problems, want 1:\n%v", len(ve.Problems), err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if !strings.HasPrefix(err.Error(), "manifest: ") {
				t.Errorf("error %q does not start with \"manifest: \"", err)
			}
			if !errors.Is(err, tt.kind) {
				t.Errorf("error %q is not %v", err, tt.kind)
			}
		})
	}
}

func TestValidateAccepts(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		name      string
		m         Manifest
		untrusted bool
	}{
		{"the full fixture", mustLoad(t, "testdata/full.yaml"), false},
		{"a source outside the base under a grant", Manifest{
			Grants:  []Grant{{Path: filepath.Join(f.outside, "granted"), ReadOnly: true}},
			Entries: map[string]Entry{"s.txt": {LocalFile: &LocalFile{Src: filepath.Join(f.outside, "granted/shared.txt")}}},
		}, false},
		{"a read-write mount under a read-write grant", Manifest{
			Grants:  []Grant{{Path: f.outside}},
			Entries: map[string]Entry{"m": {Mount: &Mount{Src: f.outside, ReadOnly: ptr(false)}}},
		}, false},
		{"an untrusted manifest using only the base", Manifest{
			Entries: map[string]Entry{"t": {LocalDir: &LocalDir{Src: "src/tree"}}, "o": {Dir: &Dir{}}},
		}, true},
		{"files inside a dir entry given separately", Manifest{
			Entries: map[string]Entry{"d": {Dir: &Dir{}}, "d/x": {File: &File{Content: "x"}}},
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.m.Validate(ValidateOptions{Base: f.base, Trusted: !tt.untrusted}); err != nil {
				t.Fatalf("Validate: %v", err)
			}
		})
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	f := newFixture(t)
	m := Manifest{
		Entries: map[string]Entry{
			"/abs":   {File: &File{Content: "x"}},
			"data/x": {LocalFile: &LocalFile{Src: "/etc/shadow"}},
			"ok.txt": {File: &File{Content: "x", Mode: 0o7777}},
		},
		RunAs: "ghost",
	}
	err := m.Validate(ValidateOptions{Base: f.base, Trusted: true})
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("Validate = %v", err)
	}
	if len(ve.Problems) != 4 {
		t.Fatalf("got %d problems, want 4:\n%v", len(ve.Problems), err)
	}
	want := `manifest: entries["data/x"]: local_file src "/etc/shadow" is outside the trusted base ` + f.base + ` (add a grant)`
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error lacks the line\n%s\ngot:\n%s", want, err)
	}
	if got := strings.Count(err.Error(), "\n") + 1; got != 4 {
		t.Errorf("error has %d lines, want one per problem", got)
	}
}

func TestValidateWithoutBaseRefusesHostSources(t *testing.T) {
	m := Manifest{Entries: map[string]Entry{"x": {LocalFile: &LocalFile{Src: "x.txt"}}}}
	err := m.Validate(ValidateOptions{Trusted: true})
	if err == nil || !strings.Contains(err.Error(), "no trusted base") {
		t.Fatalf("Validate = %v, want a missing-base error", err)
	}
}

func mustLoad(t *testing.T, p string) Manifest {
	t.Helper()
	m, err := Load(p)
	must(t, err)
	return *m
}
