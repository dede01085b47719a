package linux

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/sandbox/linux/control"

	"github.com/agentbox/agentbox/sandbox"
	"golang.org/x/sys/unix"
)

// denySpec is a spec over ws whose policy denies the given paths.
func denySpec(ws string, deny ...string) sandbox.Spec {
	return sandbox.Spec{Workspace: ws, Policy: sandbox.Policy{Filesystem: sandbox.FilesystemPolicy{Deny: deny}}}
}

// openWorkspace is a host workspace the unprivileged sandbox user may
// write in, so that a failure inside comes from the policy, not the mode.
func openWorkspace(t *testing.T) string {
	t.Helper()
	ws := t.TempDir()
	if err := os.Chmod(ws, 0o777); err != nil {
		t.Fatal(err)
	}
	return ws
}

// mustFail runs each script in s and reports those that exit 0.
func mustFail(t *testing.T, s sandbox.Session, scripts ...string) {
	t.Helper()
	for _, sc := range scripts {
		if res := run(t, s, "sh", "-c", sc); res.ExitCode == 0 {
			t.Errorf("%q succeeded inside the sandbox; stdout %q stderr %q", sc, res.Stdout, res.Stderr)
		}
	}
}

// assertEmptyOrAbsent fails unless dir is missing or an empty directory:
// the mount point a session may leave, never anything written through it.
func assertEmptyOrAbsent(t *testing.T, dir string) {
	t.Helper()
	fi, err := os.Lstat(dir)
	if os.IsNotExist(err) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if !fi.IsDir() {
		t.Fatalf("host %s is not a directory after the session (mode %v), want an empty directory or nothing", dir, fi.Mode())
	}
	if ents, _ := os.ReadDir(dir); len(ents) > 0 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("host %s holds %v after the session, want it empty", dir, names)
	}
}

// TestDeniedPathThatDoesNotExistYetCannotBeCreated is the attack on a
// denied path the workspace does not hold at the start: make it, then
// write and read in it.
func TestDeniedPathThatDoesNotExistYetCannotBeCreated(t *testing.T) {
	c := newTestClient(t)
	ws := openWorkspace(t)
	s, err := c.Create(context.Background(), denySpec(ws, "/workspace/secrets"))
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	mustFail(t, s,
		"mkdir /workspace/secrets",
		"mkdir -p /workspace/secrets/sub",
		// A bare "mkdir -p /workspace/secrets" exits 0, as on Docker: the
		// covering directory is there already. Nothing can go in it.
		"mkdir -p /workspace/secrets && echo x > /workspace/secrets/k",
		"echo x > /workspace/secrets/k",
		"ls /workspace/secrets",
		"cat /workspace/secrets/k",
		"cat /workspace/secrets",
		"rmdir /workspace/secrets && mkdir /workspace/secrets",
		"mv /workspace/secrets /workspace/moved",
		"umount /workspace/secrets",
	)
	if err := s.WriteFile(context.Background(), "/workspace/secrets/k", []byte("x"), 0o644); err == nil {
		t.Error("the file API wrote /workspace/secrets/k")
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatalf("close: %v", err)
	}
	filepath.WalkDir(ws, func(p string, d os.DirEntry, err error) error {
		if err == nil && (d.Name() == "k" || d.Name() == "sub" || d.Name() == "moved") {
			t.Errorf("host workspace holds %s after the session", p)
		}
		return nil
	})
	assertEmptyOrAbsent(t, filepath.Join(ws, "secrets"))
}

// TestDeniedFileThatDoesNotExistYetCannotBeWritten is the same attack on
// a path meant as a file (a .env the agent must not plant or read).
func TestDeniedFileThatDoesNotExistYetCannotBeWritten(t *testing.T) {
	c := newTestClient(t)
	ws := openWorkspace(t)
	s, err := c.Create(context.Background(), denySpec(ws, "/workspace/.env"))
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	mustFail(t, s,
		"echo x > /workspace/.env",
		"echo x >> /workspace/.env",
		"cat /workspace/.env",
		"rm -rf /workspace/.env && echo x > /workspace/.env",
		"ln -s /tmp/x /workspace/.env",
	)
	if err := s.WriteFile(context.Background(), "/workspace/.env", []byte("x"), 0o644); err == nil {
		t.Error("the file API wrote /workspace/.env")
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatalf("close: %v", err)
	}
	assertEmptyOrAbsent(t, filepath.Join(ws, ".env"))
}

// TestDeniedPathAHostProcessCreatesLaterStaysHidden: a denied path under
// a read-write mount that the host fills once the session runs must not
// show inside.
func TestDeniedPathAHostProcessCreatesLaterStaysHidden(t *testing.T) {
	c := newTestClient(t)
	out := openWorkspace(t)
	spec := denySpec(openWorkspace(t), "/mnt/out/secrets")
	spec.Mounts = []sandbox.Mount{{Source: out, Target: "/mnt/out"}}
	s := newTestSession(t, c, spec)
	if err := os.MkdirAll(filepath.Join(out, "secrets"), 0o755); err != nil {
		t.Fatal(err)
	}
	const secret = "written-by-the-host-later"
	if err := os.WriteFile(filepath.Join(out, "secrets", "k"), []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	res := run(t, s, "sh", "-c", "cat /mnt/out/secrets/k; ls -A /mnt/out/secrets; grep -r "+secret+" /mnt/out")
	if strings.Contains(string(res.Stdout)+string(res.Stderr), secret) || strings.Contains(string(res.Stdout), "k") {
		t.Fatalf("the host's later file shows inside: stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	mustFail(t, s, "cat /mnt/out/secrets/k", "ls /mnt/out/secrets")
}

// TestDeniedPathsInsideADeniedPathNeedNoMountPoint: a path under another
// denied path is hidden by that one's mask, in either order, and nothing
// is made for it on the host.
func TestDeniedPathsInsideADeniedPathNeedNoMountPoint(t *testing.T) {
	c := newTestClient(t)
	for _, order := range [][]string{
		{"/workspace/private", "/workspace/private/sub"},
		{"/workspace/private/sub", "/workspace/private"},
	} {
		t.Run(strings.Join(order, " then "), func(t *testing.T) {
			ws := openWorkspace(t)
			s, err := c.Create(context.Background(), denySpec(ws, order...))
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			mustFail(t, s, "ls /workspace/private", "echo x > /workspace/private/sub/k", "ls /workspace/private/sub")
			if err := s.Close(context.Background()); err != nil {
				t.Fatalf("close: %v", err)
			}
			assertEmptyOrAbsent(t, filepath.Join(ws, "private"))
		})
	}
}

// TestDeniedPathThatCannotBeCoveredIsRefused: where no mount point can
// be made for a missing denied path, the session is refused, naming why,
// and nothing is made on the host.
func TestDeniedPathThatCannotBeCoveredIsRefused(t *testing.T) {
	c := newTestClient(t)
	ro := t.TempDir()
	hostDir := t.TempDir()
	cases := []struct {
		name    string
		spec    func(ws string) sandbox.Spec
		want    string
		mustNot string // a host path that must not appear
	}{
		{"under a read-only mount", func(ws string) sandbox.Spec {
			sp := denySpec(ws, "/workspace/data/secret")
			sp.Mounts = []sandbox.Mount{{Source: ro, Target: "/workspace/data", ReadOnly: true}}
			return sp
		}, "read-only", filepath.Join(ro, "secret")},
		{"under a read-only policy path", func(ws string) sandbox.Spec {
			sp := denySpec(ws, "/workspace/in/secret")
			sp.Policy.Filesystem.ReadOnly = []string{"/workspace/in"}
			return sp
		}, "read-only", "in/secret"},
		{"under the read-only tool directories", func(ws string) sandbox.Spec {
			return denySpec(ws, "/usr/agentbox-denied-test")
		}, "read-only", "/usr/agentbox-denied-test"},
		{"under a file", func(ws string) sandbox.Spec {
			return denySpec(ws, "/workspace/notes.txt/secret")
		}, "not a directory", "notes.txt/secret"},
		{"through a symbolic link", func(ws string) sandbox.Spec {
			return denySpec(ws, "/workspace/link/new/secret")
		}, "symbolic link", filepath.Join(hostDir, "new")},
		{"the whole sandbox", func(ws string) sandbox.Spec {
			return denySpec(ws, "/")
		}, "root of the sandbox layout", ""},
		{"the workdir itself", func(ws string) sandbox.Spec {
			return denySpec(ws, "/workspace/")
		}, "root of the sandbox layout", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ws := openWorkspace(t)
			if err := os.Mkdir(filepath.Join(ws, "in"), 0o777); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("notes"), 0o666); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(hostDir, filepath.Join(ws, "link")); err != nil {
				t.Fatal(err)
			}
			s, err := c.Create(context.Background(), tc.spec(ws))
			if err == nil {
				s.Close(context.Background())
				t.Fatal("create succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want a refusal saying %q", err, tc.want)
			}
			t.Logf("refused: %v", err)
			p := tc.mustNot
			if p == "" {
				return
			}
			if !filepath.IsAbs(p) {
				p = filepath.Join(ws, p)
			}
			if _, err := os.Lstat(p); err == nil {
				t.Errorf("%s was made on the host", p)
			}
		})
	}
}

// assertAbsent fails if p is on the host.
func assertAbsent(t *testing.T, p string) {
	t.Helper()
	if _, err := os.Lstat(p); err == nil {
		t.Errorf("%s is still on the host after the session", p)
	}
}

// TestMountPointsMadeForMissingDeniedPathsGoAtClose: what a session made
// on the host to cover missing denied paths, in the workspace and in a
// read-write mount, is gone once it is closed; a directory that was there
// before it stays.
func TestMountPointsMadeForMissingDeniedPathsGoAtClose(t *testing.T) {
	c := newTestClient(t)
	ws, out := openWorkspace(t), openWorkspace(t)
	if err := os.Mkdir(filepath.Join(ws, "keep"), 0o755); err != nil {
		t.Fatal(err)
	}
	spec := denySpec(ws, "/workspace/a/b/secrets", "/workspace/.env", "/workspace/keep/x", "/mnt/out/secrets")
	spec.Mounts = []sandbox.Mount{{Source: out, Target: "/mnt/out"}}
	s, err := c.Create(context.Background(), spec)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	for _, p := range []string{filepath.Join(ws, "a/b/secrets"), filepath.Join(ws, ".env"), filepath.Join(ws, "keep/x"), filepath.Join(out, "secrets")} {
		if fi, err := os.Lstat(p); err != nil || !fi.IsDir() {
			t.Errorf("no mount point at %s during the session: %v", p, err)
		}
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatalf("close: %v", err)
	}
	for _, p := range []string{filepath.Join(ws, "a"), filepath.Join(ws, ".env"), filepath.Join(ws, "keep/x"), filepath.Join(out, "secrets")} {
		assertAbsent(t, p)
	}
	if fi, err := os.Lstat(filepath.Join(ws, "keep")); err != nil || !fi.IsDir() {
		t.Errorf("the workspace's own directory keep is gone: %v", err)
	}
}

// TestAMountPointTheHostFilledStaysAfterClose: only an empty mount point
// is removed; what the host wrote in it meanwhile, and the directories
// holding that, stay.
func TestAMountPointTheHostFilledStaysAfterClose(t *testing.T) {
	c := newTestClient(t)
	ws := openWorkspace(t)
	s, err := c.Create(context.Background(), denySpec(ws, "/workspace/a/secrets", "/workspace/a/other"))
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	k := filepath.Join(ws, "a", "secrets", "k")
	if err := os.WriteFile(k, []byte("the host's"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatalf("close: %v", err)
	}
	if b, err := os.ReadFile(k); string(b) != "the host's" {
		t.Errorf("the host's file reads %q, %v after the session", b, err)
	}
	assertAbsent(t, filepath.Join(ws, "a", "other"))
}

// TestAMountPointAnotherSessionMasksStaysAtClose: two sessions share a
// workspace and deny the same missing path; the first made its mount
// point. Closing the first must not remove it: removed on the host, it
// would be unmounted in the second session too, whose command could then
// make the denied path and write in it.
func TestAMountPointAnotherSessionMasksStaysAtClose(t *testing.T) {
	c := newTestClient(t)
	ws := openWorkspace(t)
	spec := denySpec(ws, "/workspace/secrets")
	first, err := c.Create(context.Background(), spec)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	second := newTestSession(t, c, spec)
	if err := first.Close(context.Background()); err != nil {
		t.Fatalf("close: %v", err)
	}
	if fi, err := os.Lstat(filepath.Join(ws, "secrets")); err != nil || !fi.IsDir() {
		t.Errorf("the mount point the second session masks is gone: %v", err)
	}
	mustFail(t, second,
		"mkdir -p /workspace/secrets && echo x > /workspace/secrets/k",
		"ls /workspace/secrets",
	)
	assertEmptyOrAbsent(t, filepath.Join(ws, "secrets"))
}

// TestRemovingMountPointsNeverFollowsALink: a made directory's parent
// swapped for a link by the time of removal leaves both the link and
// what it leads to alone.
func TestRemovingMountPointsNeverFollowsALink(t *testing.T) {
	base, outside := t.TempDir(), t.TempDir()
	if err := os.Mkdir(filepath.Join(outside, "secrets"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(base, "a")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(base, "b")); err != nil {
		t.Fatal(err)
	}
	err := removeMadeDirs([]madeDir{{Base: base, Rel: "a/secrets"}, {Base: base, Rel: "a"}, {Base: base, Rel: "b"}})
	if err != nil {
		t.Errorf("removeMadeDirs: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(outside, "secrets")); err != nil || !fi.IsDir() {
		t.Errorf("the directory behind the link was removed: %v", err)
	}
	for _, l := range []string{"a", "b"} {
		if fi, err := os.Lstat(filepath.Join(base, l)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("the link %s is gone: %v", l, err)
		}
	}
}

// TestRemovingMountPointsNeverFollowsASwappedBase: the base itself (a
// read-write mount's source, which may sit in the workspace) renamed away
// and replaced by a link to a host directory, or by another directory,
// by the time of removal: nothing is removed, there or behind the link.
func TestRemovingMountPointsNeverFollowsASwappedBase(t *testing.T) {
	for _, swap := range []string{"a link", "another directory"} {
		t.Run(swap, func(t *testing.T) {
			ws, host := t.TempDir(), t.TempDir()
			base := filepath.Join(ws, "sub")
			if err := os.Mkdir(base, 0o755); err != nil {
				t.Fatal(err)
			}
			var st unix.Stat_t
			if err := unix.Stat(base, &st); err != nil {
				t.Fatal(err)
			}
			d := madeDir{Base: base, Rel: "victim", Dev: st.Dev, Ino: st.Ino}
			if err := os.Mkdir(filepath.Join(host, "victim"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(base, base+".real"); err != nil {
				t.Fatal(err)
			}
			if swap == "a link" {
				if err := os.Symlink(host, base); err != nil {
					t.Fatal(err)
				}
			} else if err := os.Mkdir(base, 0o755); err != nil {
				t.Fatal(err)
			} else if err := os.Mkdir(filepath.Join(base, "victim"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := removeMadeDirs([]madeDir{d}); err != nil {
				t.Errorf("removeMadeDirs: %v", err)
			}
			for _, p := range []string{filepath.Join(host, "victim"), filepath.Join(ws, "sub", "victim")} {
				if swap == "a link" && p == filepath.Join(ws, "sub", "victim") {
					continue // the same directory as the host one
				}
				if fi, err := os.Stat(p); err != nil || !fi.IsDir() {
					t.Errorf("%s was removed through the swapped base: %v", p, err)
				}
			}
		})
	}
}

// TestRecordedMountPointsAreOnlyWhatIsMissing: recordMadeDirs lists,
// deepest first, the directories the init will make and nothing that
// exists, is read-only, or is another denied path's to hide.
func TestRecordedMountPointsAreOnlyWhatIsMissing(t *testing.T) {
	ws, out, ro := t.TempDir(), t.TempDir(), t.TempDir()
	for _, d := range []string{"have", "in"} {
		if err := os.Mkdir(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(out, filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	cfg := &control.Config{
		Workdir:  "/workspace",
		Mounts:   []sandbox.Mount{{Source: out, Target: "/mnt/out"}, {Source: ro, Target: "/workspace/ro", ReadOnly: true}},
		ReadOnly: []string{"/workspace/in"},
		Deny: []string{
			"/workspace/have", "/workspace/have/x/y", "/workspace/new", "/workspace/in/x",
			"/workspace/ro/x", "/workspace/link/x", "/mnt/out/s", "/tmp/x", "/workspace/new/inner",
		},
	}
	got := madeNames(recordMadeDirs(ws, cfg))
	want := []madeDir{{Base: ws, Rel: "new"}, {Base: out, Rel: "s"}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("recorded %v, want %v", got, want)
	}
	cfg.Deny = []string{"/workspace/have/x/y"}
	got = madeNames(recordMadeDirs(ws, cfg))
	want = []madeDir{{Base: ws, Rel: "have/x/y"}, {Base: ws, Rel: "have/x"}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("recorded %v, want %v", got, want)
	}
}

// madeNames drops what identifies each base (Dev, Ino), for comparisons.
func madeNames(ds []madeDir) []madeDir {
	out := make([]madeDir, len(ds))
	for i, d := range ds {
		if d.Ino == 0 {
			panic("a recorded base has no inode")
		}
		out[i] = madeDir{Base: d.Base, Rel: d.Rel}
	}
	return out
}

// TestTheSandboxRootKeepsNoStagingPoint: the staging points serve the
// set-up only; the command's / does not show them.
func TestTheSandboxRootKeepsNoStagingPoint(t *testing.T) {
	c := newTestClient(t)
	ws := t.TempDir()
	spec := denySpec(ws, "/workspace/.env")
	spec.Policy.Filesystem.ReadOnly = []string{"/workspace"}
	if err := os.WriteFile(filepath.Join(ws, ".env"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := newTestSession(t, c, spec)
	res := run(t, s, "ls", "-a", "/")
	if res.ExitCode != 0 || strings.Contains(string(res.Stdout), ".agentbox-stage") {
		t.Errorf("ls -a / exits %d and shows %q", res.ExitCode, res.Stdout)
	}
}
