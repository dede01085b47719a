package wsfs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The root's host path (/proc/<pid>/root/workspace for a native session)
// means nothing to whoever asked for a workspace path, a model among
// them, and tells a sandboxed agent about the host: errors name the path
// they were given, relative to the root, and never the root's.
func TestErrorsNameTheRelativePathNotTheRoot(t *testing.T) {
	fx := newFixture(t)
	must(t, os.WriteFile(filepath.Join(fx.root, "file"), []byte("x"), 0o644))
	must(t, os.Mkdir(filepath.Join(fx.root, "dir"), 0o755))
	tests := []struct {
		name string
		do   func() error
	}{
		{"reading a missing file", func() error { _, err := fx.r.ReadFile("missing/report.md", 0); return err }},
		{"reading a directory", func() error { _, err := fx.r.ReadFile("dir", 0); return err }},
		{"stat of a missing file", func() error { _, err := fx.r.Stat("missing"); return err }},
		{"listing a missing directory", func() error { _, err := fx.r.ListDir("missing"); return err }},
		{"writing under a file", func() error { return fx.r.WriteFile("file/sub/x", []byte("x"), 0o644, -1, -1) }},
		{"removing a missing file", func() error { return fx.r.Remove("missing") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.do()
			if err == nil {
				t.Fatal("no error")
			}
			if strings.Contains(err.Error(), fx.root) {
				t.Fatalf("the error names the root's host path %s: %v", fx.root, err)
			}
		})
	}
}
