package linux

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/sandbox"
)

// A state directory deep enough that the control socket's path does not
// fit sun_path (108 bytes) still works: bind and connect go through a
// descriptor of the directory. A long TMPDIR or XDG_RUNTIME_DIR makes
// such paths (rootless sessions keep their state there).
func TestAStateDirectoryWithALongPathStillWorks(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("a-long-directory-name-", 6))
	c := newTestClientWith(t, Options{StateDir: dir})
	s := newTestSession(t, c, sandbox.Spec{})
	if sock := s.(*session).h.Socket; len(sock) < 108 {
		t.Fatalf("socket path %q is only %d bytes: the test needs a longer one", sock, len(sock))
	}
	if res := run(t, s, "echo", "ok"); res.ExitCode != 0 || string(res.Stdout) != "ok\n" {
		t.Fatalf("exec: exit %d, stdout %q", res.ExitCode, res.Stdout)
	}
	// A second client, as another process would, resumes through it.
	c2, err := New(Options{StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	s2, err := c2.Resume(context.Background(), s.State())
	if err != nil {
		t.Fatalf("resume: %v", err)
	}
	if s2.ID() != s.ID() {
		t.Errorf("resume rebuilt the session (%s) instead of reattaching to %s", s2.ID(), s.ID())
	}
}

// A workspace or mount that holds the state directory would put the
// control sockets of every session within the sandbox's reach.
func TestAMountHoldingTheStateDirectoryIsRefused(t *testing.T) {
	top := t.TempDir()
	c := newTestClientWith(t, Options{StateDir: filepath.Join(top, "state")})
	for _, spec := range []sandbox.Spec{
		{Workspace: top},
		{Mounts: []sandbox.Mount{{Source: top, Target: "/mnt/top", ReadOnly: true}}},
	} {
		s, err := c.Create(context.Background(), spec)
		if err == nil {
			s.Close(context.Background())
			t.Errorf("Create(%+v) succeeded", spec)
			continue
		}
		if !strings.Contains(err.Error(), "state directory") {
			t.Errorf("err = %v, want a refusal naming the state directory", err)
		}
	}
}
