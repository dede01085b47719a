package escapetest

import (
	"bytes"
	"os"
	"testing"

	"github.com/agentbox/agentbox/sandbox"
)

// TestOverwritingTheHostAgentboxBinaryFails tries the runc
// CVE-2019-5736 class of escape: the session's init is the host's
// agentbox binary re-executed, so /proc/1/exe and, in a command forked
// by the init before its execve, /proc/self/exe lead to that host file.
// Running it, or writing it, would be code execution on the host.
func TestOverwritingTheHostAgentboxBinaryFails(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	for _, who := range bothUsers(t) {
		t.Run(who.name, func(t *testing.T) {
			for _, path := range []string{"/proc/self/exe", "/proc/1/exe"} {
				t.Run("executing "+path+" as the command fails", func(t *testing.T) {
					r, err := sandbox.Exec(t.Context(), who.s, sandbox.ExecRequest{Cmd: []string{path, "-test.list", "."}})
					if err == nil && r.ExitCode == 0 {
						t.Fatalf("ESCAPE: the host's agentbox binary ran inside the sandbox: %q", r.Stdout)
					}
					t.Logf("refused: %v (exit %d)", err, r.ExitCode)
				})
			}
			results := batch(t, who.s, [][]string{
				{"write", "/proc/1/exe", "pwned"},
				{"read", "/proc/1/exe"},
				{"reopen-rw", "/proc/1/exe"},
			})
			for _, o := range results {
				t.Run(o.Args[0]+" of /proc/1/exe fails", func(t *testing.T) { o.Failed(t) })
			}
		})
	}
	if after, _ := os.ReadFile(exe); !bytes.Equal(before, after) {
		t.Fatalf("ESCAPE: the host's %s changed", exe)
	}
}

func TestReadingADeniedPathFails(t *testing.T) {
	ws := t.TempDir()
	os.Chmod(ws, 0o777)
	want := secret(t)
	if err := os.MkdirAll(ws+"/private/deeper", 0o777); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/private/key", "/private/deeper/key", "/key.pem"} {
		if err := os.WriteFile(ws+p, []byte(want), 0o666); err != nil {
			t.Fatal(err)
		}
	}
	s := newSession(t, sandbox.Spec{Workspace: ws, Policy: sandbox.Policy{Filesystem: sandbox.FilesystemPolicy{
		Deny: []string{"/workspace/private", "/workspace/key.pem"},
	}}})
	results := batch(t, s, [][]string{
		{"read", "/workspace/private/key"},
		{"read", "/workspace/private/deeper/key"},
		{"read", "/workspace/key.pem"},
		{"read", "/proc/self/root/workspace/private/key"},
		{"read", "/proc/1/root/workspace/private/key"},
		{"umount", "/workspace/private"},
		{"umount", "/workspace/key.pem"},
		{"open-by-handle", "/workspace/private"},
	})
	for _, o := range results {
		t.Run(o.Args[0]+" "+o.Args[1]+" fails", func(t *testing.T) {
			if bytes.Contains([]byte(o.Out), []byte(want)) {
				t.Fatalf("ESCAPE: the denied content leaked:\n%s", o.Out)
			}
			o.Failed(t)
		})
	}
	scripts := []string{
		"ls -A /workspace/private",
		"mv /workspace/private /workspace/moved && cat /workspace/moved/key",
		"rm -rf /workspace/private && ls /workspace/private",
		"cd /workspace/private && cat key",
		"tar -C /workspace -cf - . | grep -a " + want,
		"grep -ra " + want + " /workspace",
	}
	rs := shBatch(t, s, scripts)
	for i, sc := range scripts {
		t.Run(sc+" fails", func(t *testing.T) {
			if bytes.Contains([]byte(rs[i].out), []byte(want)) {
				t.Fatalf("ESCAPE: %q showed the denied content:\n%s", sc, rs[i].out)
			}
			if rs[i].code == 0 && i < 4 {
				t.Errorf("%q succeeded: %s", sc, rs[i].out)
			}
		})
	}
	for _, p := range []string{"/private/key", "/private/deeper/key", "/key.pem"} {
		if b, err := os.ReadFile(ws + p); err != nil || string(b) != want {
			t.Errorf("the host's denied %s was changed or removed: %q %v", p, b, err)
		}
	}
}
