package escapetest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/sandbox"
)

// TestRenamingTheParentOfAProtectedPathFails: the mount that makes a path
// read-only or hidden sits on that path; renaming a parent directory in
// the writable workspace would carry the mount away and leave the path to
// be made anew. Every parent is a mount point, so the rename is refused.
func TestRenamingTheParentOfAProtectedPathFails(t *testing.T) {
	base := t.TempDir()
	os.Chmod(base, 0o755)
	ws := filepath.Join(base, "workspace")
	for _, d := range []string{"", "src/conf", "vault"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o777); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []struct{ p, s string }{{"src/conf/app.yaml", "original\n"}, {"vault/key", "hunter2\n"}} {
		if err := os.WriteFile(filepath.Join(ws, f.p), []byte(f.s), 0o666); err != nil {
			t.Fatal(err)
		}
	}
	if !rootless() {
		filepath.Walk(ws, func(p string, _ os.FileInfo, _ error) error { return os.Chown(p, 1000, 1000) })
	}
	s := newSession(t, sandbox.Spec{
		Workspace: ws,
		Policy: sandbox.Policy{Filesystem: sandbox.FilesystemPolicy{
			ReadOnly: []string{"/workspace/src/conf/app.yaml"},
			Deny:     []string{"/workspace/vault/key", "/workspace/later/secret"},
		}},
	})
	attacks := []struct{ name, script, leak string }{
		{"rewrite a read-only file by moving its directory away",
			"mv /workspace/src/conf /workspace/old || mv /workspace/src /workspace/old; mkdir -p /workspace/src/conf; echo EVIL > /workspace/src/conf/app.yaml; cat /workspace/src/conf/app.yaml", "EVIL"},
		{"read a denied file by moving its directory away",
			"mv /workspace/vault /workspace/v2; cat /workspace/v2/key", "hunter2"},
		{"write a denied path that did not exist by moving its parent away",
			"mv /workspace/later /workspace/l2; mkdir -p /workspace/later/secret && echo x > /workspace/later/secret/k && echo WROTE", "WROTE"},
	}
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			r := sh(t, s, a.script)
			if strings.Contains(string(r.Stdout), a.leak) {
				t.Errorf("ESCAPE: %s\nstdout %q\nstderr %q", a.name, r.Stdout, r.Stderr)
			}
		})
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "src/conf/app.yaml")); string(b) != "original\n" {
		t.Errorf("the read-only file on the host now holds %q", b)
	}
}
