package sandbox

import (
	"errors"
	"strings"
	"testing"
)

func TestResolveWorkspacePath(t *testing.T) {
	tests := []struct {
		name    string
		workdir string
		path    string
		want    string
		kind    error
	}{
		{"an empty path is the workspace root", "", "", ".", nil},
		{"dot is the workspace root", "", ".", ".", nil},
		{"the workdir itself is the root", "", "/workspace", ".", nil},
		{"the workdir with a slash is the root", "", "/workspace/", ".", nil},
		{"an absolute path under the workdir is made relative", "", "/workspace/a/b", "a/b", nil},
		{"a relative path is cleaned", "", "a/./b//c/", "a/b/c", nil},
		{"dot-dot inside the workspace is resolved", "", "a/../b", "b", nil},
		{"an absolute dot-dot that stays inside is resolved", "", "/workspace/a/../b", "b", nil},
		{"three dots is an ordinary name", "", "...", "...", nil},
		{"a name starting with dot-dot is ordinary", "", "..a/b", "..a/b", nil},
		{"a custom workdir maps its own paths", "/home/agent", "/home/agent/x", "x", nil},
		{"dot-dot alone escapes", "", "..", "", ErrPathEscape},
		{"dot-dot slash escapes", "", "../x", "", ErrPathEscape},
		{"a dot-dot after a directory escapes", "", "a/../../x", "", ErrPathEscape},
		{"an absolute dot-dot out of the workdir escapes", "", "/workspace/../etc/passwd", "", ErrPathEscape},
		{"an absolute path outside escapes", "", "/etc/passwd", "", ErrPathEscape},
		{"a sibling with the workdir as prefix escapes", "", "/workspacefoo/x", "", ErrPathEscape},
		{"the default workdir is outside a custom one", "/home/agent", "/workspace/x", "", ErrPathEscape},
		{"the filesystem root escapes", "", "/", "", ErrPathEscape},
		{"a NUL byte is invalid", "", "a\x00b", "", ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ResolveWorkspacePath(tt.workdir, tt.path)
			if tt.kind != nil {
				if !errors.Is(err, tt.kind) {
					t.Fatalf("ResolveWorkspacePath(%q, %q) = %q, %v; want %v", tt.workdir, tt.path, got, err, tt.kind)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ResolveWorkspacePath(%q, %q) = %q, %v; want %q", tt.workdir, tt.path, got, err, tt.want)
			}
		})
	}
}

func TestValidateMountTarget(t *testing.T) {
	tests := []struct {
		name    string
		workdir string
		target  string
		kind    error // nil: valid
		says    string
	}{
		{"a directory under the workspace is valid", "", "/workspace/data", nil, ""},
		{"a directory under /mnt is valid", "", "/mnt/in", nil, ""},
		{"a directory under /opt is valid", "", "/opt/tool", nil, ""},
		{"a directory under /data is valid", "", "/data/set", nil, ""},
		{"an unclean path that stays inside is valid", "", "/mnt/a/../b", nil, ""},
		{"a directory under a custom workdir is valid", "/home/agent", "/home/agent/in", nil, ""},
		{"the workspace itself would be hidden", "", "/workspace", ErrPathEscape, "such as /workspace/NAME"},
		{"a mount root itself is refused, and a directory under it suggested", "", "/data", ErrPathEscape, `"/data" is a mount root itself, which a mount would hide; mount at a directory under it, such as /data/NAME`},
		{"a system directory is outside the layout", "", "/etc", ErrPathEscape, "mount at a directory under one of /workspace, /mnt, /opt, /data"},
		{"dot-dot out of /mnt is outside the layout", "", "/mnt/../etc", ErrPathEscape, ""},
		{"a sibling with a root as prefix is outside", "", "/mntx/a", ErrPathEscape, ""},
		{"the default workspace under a custom workdir is outside", "/home/agent", "/workspace/in", ErrPathEscape, ""},
		{"a relative target is invalid", "", "data", ErrInvalid, ""},
		{"an empty target is invalid", "", "", ErrInvalid, ""},
		{"a NUL byte is invalid", "", "/mnt/a\x00b", ErrInvalid, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateMountTarget(tt.workdir, tt.target)
			if tt.kind == nil {
				if err != nil {
					t.Fatalf("ValidateMountTarget(%q) = %v, want valid", tt.target, err)
				}
				return
			}
			if !errors.Is(err, tt.kind) {
				t.Fatalf("ValidateMountTarget(%q) = %v, want %v", tt.target, err, tt.kind)
			}
			if !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("ValidateMountTarget(%q) = %v, want it to say %q", tt.target, err, tt.says)
			}
		})
	}
}
