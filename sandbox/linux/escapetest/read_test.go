package escapetest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/sandbox"
)

// plantHostSecret writes a world-readable file holding a unique secret in
// a world-traversable host directory (so that only the sandbox's walls,
// not file permissions, keep it out) and returns its path and content.
func plantHostSecret(t *testing.T, parent string) (string, string) {
	t.Helper()
	dir, err := os.MkdirTemp(parent, "agentbox-escapetest-plant-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := secret(t)
	p := filepath.Join(dir, "secret.txt")
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return p, s
}

func TestReadingAHostFileOutsideTheWorkspaceFails(t *testing.T) {
	s := shared(t)
	root := rootSession(t)
	planted, want := plantHostSecret(t, "")
	rootDir := "/root"
	if _, err := os.Stat(rootDir); err != nil || rootless() {
		rootDir = "" // no /root on this host, or not root: plant in the temp dir again
	}
	inRoot, wantRoot := plantHostSecret(t, rootDir)
	stateJSON := filepath.Join(stateDirOf(t, s), "state.json")
	shadow, _ := os.ReadFile("/etc/shadow")
	cases := []struct {
		name, path, secret string
	}{
		{"a planted host file by its host path", planted, want},
		{"a planted file in the host's /root", inRoot, wantRoot},
		{"the host's /etc/shadow", "/etc/shadow", firstLine(shadow)},
		{"through /proc/1/root", "/proc/1/root" + planted, want},
		{"through /proc/self/root", "/proc/self/root" + planted, want},
		{"through /proc/1/cwd", "/proc/1/cwd" + planted, want},
		{"by climbing out of the workspace with ..", "/workspace/../../.." + planted, want},
		{"the session's own host state file", stateJSON, `"init_pid"`},
	}
	for _, who := range bothUsers(t) {
		var list [][]string
		for _, tc := range cases {
			list = append(list, []string{"read", tc.path})
		}
		results := batch(t, who.s, list)
		for i, tc := range cases {
			t.Run(who.name+"/"+tc.name, func(t *testing.T) {
				o := results[i]
				if tc.secret != "" && strings.Contains(o.Out, tc.secret) {
					t.Fatalf("ESCAPE: read the host's %s from inside:\n%s", tc.path, o.Out)
				}
				o.Failed(t)
			})
		}
	}
	// By file handle (the shocker attack): attacktest.Kernel's
	// open_by_handle_at, in TestKernelAttackSurfaceIsClosed.
	t.Run("the sandbox's /etc/shadow does not exist", func(t *testing.T) {
		if got, out := attack(t, root, "read", "/etc/shadow"); got == "ok" {
			t.Errorf("the sandbox has an /etc/shadow:\n%s", out)
		}
	})
}

func firstLine(b []byte) string {
	line, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimSpace(line)
}

func TestFollowingASymlinkPlantedForTheHostFails(t *testing.T) {
	s := shared(t)
	ctx := context.Background()
	planted, want := plantHostSecret(t, "")
	hostDir := filepath.Dir(planted)
	victim := filepath.Join(hostDir, "victim.txt")
	if err := os.WriteFile(victim, []byte("unchanged"), 0o666); err != nil {
		t.Fatal(err)
	}
	r := sh(t, s, "cd /workspace && ln -sf "+planted+" abs-link && ln -sf ../../../../../../.."+planted+" rel-link && "+
		"ln -sf "+victim+" victim-link && ln -sfn "+hostDir+" dir-link")
	if r.ExitCode != 0 {
		t.Fatalf("plant the links: %s", r.Stderr)
	}
	t.Run("ReadFile through an absolute link", func(t *testing.T) {
		if b, err := s.ReadFile(ctx, "abs-link"); err == nil && strings.Contains(string(b), want) {
			t.Fatalf("ESCAPE: ReadFile followed a link to the host's %s", planted)
		} else {
			t.Logf("refused: %v", err)
		}
	})
	t.Run("ReadFile through a relative link climbing out", func(t *testing.T) {
		if b, err := s.ReadFile(ctx, "rel-link"); err == nil && strings.Contains(string(b), want) {
			t.Fatalf("ESCAPE: ReadFile followed ../ out to the host's %s", planted)
		} else {
			t.Logf("refused: %v", err)
		}
	})
	t.Run("ReadFile through a linked directory", func(t *testing.T) {
		if b, err := s.ReadFile(ctx, "dir-link/secret.txt"); err == nil && strings.Contains(string(b), want) {
			t.Fatalf("ESCAPE: ReadFile went through a directory link to the host")
		} else {
			t.Logf("refused: %v", err)
		}
	})
	t.Run("WriteFile through a link to a host file", func(t *testing.T) {
		err := s.WriteFile(ctx, "victim-link", []byte("pwned"), 0o644)
		t.Logf("WriteFile: %v", err)
		if b, _ := os.ReadFile(victim); string(b) != "unchanged" {
			t.Fatalf("ESCAPE: WriteFile through a planted link changed the host's %s to %q", victim, b)
		}
	})
	t.Run("WriteFile into a linked directory", func(t *testing.T) {
		err := s.WriteFile(ctx, "dir-link/dropped.txt", []byte("pwned"), 0o644)
		t.Logf("WriteFile: %v", err)
		if _, err := os.Stat(filepath.Join(hostDir, "dropped.txt")); err == nil {
			t.Fatalf("ESCAPE: WriteFile through a directory link created a file in the host's %s", hostDir)
		}
	})
	t.Run("ListDir through a linked directory", func(t *testing.T) {
		infos, err := s.ListDir(ctx, "dir-link")
		for _, fi := range infos {
			if fi.Name == "secret.txt" || fi.Name == "victim.txt" {
				t.Fatalf("ESCAPE: ListDir listed the host's %s", hostDir)
			}
		}
		t.Logf("ListDir: %d entries, %v", len(infos), err)
	})
	t.Run("closing a session does not delete through its links", func(t *testing.T) {
		c := newClient(t)
		s2, err := c.Create(ctx, withHelper(sandbox.Spec{}))
		if err != nil {
			t.Fatal(err)
		}
		if r := sh(t, s2, "ln -s "+hostDir+" /workspace/dir-link && ln -s "+victim+" /workspace/file-link && mkdir -p /workspace/d && ln -s "+hostDir+" /workspace/d/deeper"); r.ExitCode != 0 {
			t.Fatalf("plant the links: %s", r.Stderr)
		}
		if err := s2.Close(ctx); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{planted, victim} {
			if _, err := os.Stat(p); err != nil {
				t.Errorf("ESCAPE: closing the session removed the host's %s: %v", p, err)
			}
		}
	})
}
