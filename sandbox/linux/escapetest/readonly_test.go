package escapetest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/sandbox"
)

func TestWritingAReadOnlyMountFails(t *testing.T) {
	base := t.TempDir()
	os.Chmod(base, 0o755)
	ws := filepath.Join(base, "workspace")
	if err := os.Mkdir(ws, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(ws, 0o777)
	os.Chown(ws, 1000, 1000)
	targets := []struct {
		name, inside string
		fx           *readOnlyFixture
	}{
		{"a read-only mount inside the workspace", "/workspace/data", newReadOnlyFixture(t, filepath.Join(base, "data"))},
		{"a read-only mount under /mnt", "/mnt/ro", newReadOnlyFixture(t, filepath.Join(base, "mnt"))},
		{"a read-only policy path of the workspace", "/workspace/inputs", newReadOnlyFixture(t, filepath.Join(ws, "inputs"))},
	}
	s := newSession(t, sandbox.Spec{
		Workspace: ws,
		Mounts: []sandbox.Mount{
			{Source: targets[0].fx.dir, Target: targets[0].inside, ReadOnly: true},
			{Source: targets[1].fx.dir, Target: targets[1].inside, ReadOnly: true},
		},
		Policy: sandbox.Policy{Filesystem: sandbox.FilesystemPolicy{ReadOnly: []string{targets[2].inside}}},
	})
	if r := sh(t, s, "echo decoy > /workspace/decoy && id -u"); r.ExitCode != 0 || string(r.Stdout) != "1000\n" {
		t.Fatalf("set-up: exit %d %q %q", r.ExitCode, r.Stdout, r.Stderr)
	}
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			in := tg.inside
			f := in + "/input.csv"
			if r := sh(t, s, "cat "+f); r.ExitCode != 0 {
				t.Fatalf("the read-only file is not readable: %s", r.Stderr)
			}
			helperCases := []struct {
				name string
				want []string
				args []string
			}{
				{"overwriting a file", []string{"EROFS"}, []string{"write", f, "pwned"}},
				{"creating a file", []string{"EROFS"}, []string{"write", in + "/new", "pwned"}},
				{"creating a file in a subdirectory", []string{"EROFS"}, []string{"write", in + "/sub/new", "pwned"}},
				{"reopening a read-only descriptor for writing through /proc/self/fd", []string{"EROFS"}, []string{"reopen-rw", f}},
				{"setting an extended attribute", []string{"EROFS"}, []string{"setxattr", f}},
				{"remounting it read-write", []string{"EPERM"}, []string{"remount-rw", in}},
				{"clearing its read-only flag with mount_setattr", []string{"EPERM"}, []string{"mount-setattr-rw", in}},
				{"unmounting it to reach what is below", []string{"EPERM"}, []string{"umount", in}},
				{"binding a writable directory over it", []string{"EPERM"}, []string{"mount-bind", "/tmp", in}},
			}
			var list [][]string
			for _, c := range helperCases {
				list = append(list, c.args)
			}
			results := batch(t, s, list)
			for i, c := range helperCases {
				t.Run(c.name+" fails", func(t *testing.T) {
					results[i].Failed(t, c.want...)
				})
			}
			shellCases := []struct{ name, script string }{
				{"appending to a file", "echo pwned >> " + f},
				{"truncating a file", "truncate -s 0 " + f},
				{"making a directory", "mkdir " + in + "/newdir"},
				{"chmod", "chmod 0777 " + f},
				{"chown to oneself", "chown 1000:1000 " + f},
				{"touching the mtime", "touch -d 2001-01-01 " + f},
				{"renaming a file inside it", "mv " + f + " " + in + "/renamed"},
				{"renaming a workspace file over a file", "mv -f /workspace/decoy " + f},
				{"moving a file out of it", "mv " + f + " /workspace/moved"},
				{"unlinking a file", "rm -f " + f},
				{"removing a directory tree", "rm -rf " + in + "/sub"},
				{"hard linking a file out and writing the link", "ln " + f + " /workspace/hardlink && echo pwned >> /workspace/hardlink"},
				{"symlinking over a file", "ln -sf /etc/passwd " + f},
			}
			var scripts []string
			for _, c := range shellCases {
				scripts = append(scripts, c.script)
			}
			shResults := shBatch(t, s, scripts)
			for i, c := range shellCases {
				t.Run(c.name+" fails", func(t *testing.T) {
					r := shResults[i]
					if r.code == 0 {
						t.Errorf("%q succeeded inside: %q", c.script, r.out)
					}
					t.Logf("exit %d: %s", r.code, r.out)
				})
			}
			if r := sh(t, s, "echo decoy > /workspace/decoy"); r.ExitCode != 0 {
				t.Fatalf("restore the decoy: %s", r.Stderr)
			}
			tg.fx.assertUnchanged(t)
		})
	}
}

// TestPlantingASymlinkWhereAMountGoesFails prepares a workspace (as an
// earlier session could have left it) whose mount target, read-only path
// and denied path are symlinks leading out to the host. The mounts are
// made before pivot_root, so a followed link would resolve against the
// host's root: the session must refuse, or keep everything inside.
func TestPlantingASymlinkWhereAMountGoesFails(t *testing.T) {
	newClient(t)
	hostDir := t.TempDir()
	os.Chmod(hostDir, 0o777)
	victim := filepath.Join(hostDir, "victim.txt")
	if err := os.WriteFile(victim, []byte("unchanged"), 0o666); err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	os.Chmod(src, 0o777)
	cases := []struct {
		name string
		spec func(ws string) sandbox.Spec
	}{
		{"a read-write mount target", func(ws string) sandbox.Spec {
			return sandbox.Spec{Workspace: ws, Mounts: []sandbox.Mount{{Source: src, Target: "/workspace/link"}}}
		}},
		{"a read-only mount target", func(ws string) sandbox.Spec {
			return sandbox.Spec{Workspace: ws, Mounts: []sandbox.Mount{{Source: src, Target: "/workspace/link", ReadOnly: true}}}
		}},
		{"a read-only policy path", func(ws string) sandbox.Spec {
			return sandbox.Spec{Workspace: ws, Policy: sandbox.Policy{Filesystem: sandbox.FilesystemPolicy{ReadOnly: []string{"/workspace/link"}}}}
		}},
		{"a denied policy path", func(ws string) sandbox.Spec {
			return sandbox.Spec{Workspace: ws, Policy: sandbox.Policy{Filesystem: sandbox.FilesystemPolicy{Deny: []string{"/workspace/link"}}}}
		}},
	}
	for _, tc := range cases {
		for _, link := range []struct{ kind, target string }{{"an absolute", hostDir}, {"a relative", "../../../../../../../.." + hostDir}} {
			t.Run(tc.name+" planted as "+link.kind+" link", func(t *testing.T) {
				ws := t.TempDir()
				os.Chmod(ws, 0o777)
				if err := os.Symlink(link.target, filepath.Join(ws, "link")); err != nil {
					t.Fatal(err)
				}
				c := newClient(t)
				s, err := c.Create(t.Context(), withHelper(tc.spec(ws)))
				if err != nil {
					t.Logf("refused: %v", err)
				} else {
					r := sh(t, s, "echo pwned > /workspace/link/victim.txt; echo pwned > /workspace/link/new.txt; cat /workspace/link/victim.txt")
					t.Logf("inside: exit %d %q %q", r.ExitCode, r.Stdout, r.Stderr)
					if err := s.Close(t.Context()); err != nil {
						t.Errorf("close: %v", err)
					}
				}
				if b, _ := os.ReadFile(victim); string(b) != "unchanged" {
					t.Fatalf("ESCAPE: the host's %s now holds %q", victim, b)
				}
				if _, err := os.Stat(filepath.Join(hostDir, "new.txt")); err == nil {
					t.Fatalf("ESCAPE: a file appeared in the host's %s", hostDir)
				}
			})
		}
	}
	// Other packages' sessions and containers change the host's mount
	// table meanwhile: look only for this test's directories.
	if now, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(now), hostDir) || strings.Contains(string(now), src) {
		t.Errorf("ESCAPE: a mount on this test's directories appeared in the host's mount table:\n%s", now)
	}
}
