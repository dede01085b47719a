package manifest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/sandbox"
)

func TestRender(t *testing.T) {
	ws := t.TempDir()
	mounted := t.TempDir()
	for i := range 8 {
		must(t, os.WriteFile(filepath.Join(ws, fmt.Sprintf("f%d.txt", i)), []byte("12345"), 0o644))
	}
	must(t, os.MkdirAll(filepath.Join(ws, "a/b/c/d"), 0o755))
	must(t, os.WriteFile(filepath.Join(ws, "a/b/c/d/deep.txt"), nil, 0o644))
	must(t, os.Mkdir(filepath.Join(ws, "data"), 0o755))
	must(t, os.WriteFile(filepath.Join(mounted, "statement.csv"), make([]byte, 3000), 0o644))
	must(t, os.Symlink("f0.txt", filepath.Join(ws, "link")))
	mounts := []sandbox.Mount{{Source: mounted, Target: "/workspace/data", ReadOnly: true}}

	tests := []struct {
		name      string
		opts      RenderOptions
		want, not []string
	}{
		{
			name: "dirs end in a slash, files show sizes, links their target, mounts are marked",
			opts: RenderOptions{MaxDepth: 5, MaxEntries: 100, Mounts: mounts},
			want: []string{"/workspace/\n", "  a/\n", "  data/  (read-only mount)\n", "    statement.csv  (2.9 KiB)\n", "  f0.txt  (5 B)\n", "  link -> f0.txt\n", "        deep.txt"},
		},
		{
			name: "depth is bounded with a marker",
			opts: RenderOptions{MaxDepth: 2, MaxEntries: 100},
			want: []string{"    b/\n", "      … 1 more\n"},
			not:  []string{"c/", "deep.txt"},
		},
		{
			name: "entries are bounded with a marker",
			opts: RenderOptions{MaxDepth: 1, MaxEntries: 3},
			want: []string{"  a/\n", "  data/\n", "  f0.txt", "  … 8 more\n"},
			not:  []string{"f1.txt"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Render(ws, tt.opts)
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("render lacks %q:\n%s", w, got)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(got, n) {
					t.Errorf("render has %q past its bounds:\n%s", n, got)
				}
			}
			if lines := strings.Count(got, "\n"); tt.opts.MaxEntries < 100 && lines > tt.opts.MaxEntries+3 {
				t.Errorf("render has %d lines for MaxEntries %d", lines, tt.opts.MaxEntries)
			}
		})
	}
}
