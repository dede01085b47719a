package escapetest

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/agentbox/agentbox/sandbox"
)

// TestPlantingASetuidBinaryInTheHostWorkspaceFails: the workspace of a
// spec with Spec.Workspace is a host directory, and the sandbox's uids are
// the host's (no user namespace): a file root inside creates is owned by
// host uid 0, one the sandbox user creates by host uid 1000. chmod u+s
// needs only ownership, and nosuid on the sandbox's mount does not follow
// the file to the host, where the directory usually sits on a file system
// without nosuid. A host user running the planted file (a build output
// someone executes, say) would run it as root (or as uid 1000).
func TestPlantingASetuidBinaryInTheHostWorkspaceFails(t *testing.T) {
	base := t.TempDir()
	os.Chmod(base, 0o755)
	ws := filepath.Join(base, "workspace")
	if err := os.Mkdir(ws, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(ws, 0o777)
	for _, who := range []struct {
		name string
		spec sandbox.Spec
	}{
		{"as root inside the sandbox", sandbox.Spec{Workspace: ws, User: "0"}},
		{"as the sandbox user", sandbox.Spec{Workspace: ws}},
	} {
		t.Run(who.name, func(t *testing.T) {
			s := newSession(t, who.spec)
			name := "planted-" + who.spec.User
			script := "cp /bin/true " + name + " && chmod 6755 " + name + "; " +
				"cp /bin/true " + name + ".2 && chmod u+s " + name + ".2; true"
			if r := sh(t, s, script); r.ExitCode != 0 {
				t.Fatalf("set-up: exit %d %q", r.ExitCode, r.Stderr)
			}
			for _, n := range []string{name, name + ".2"} {
				fi, err := os.Lstat(filepath.Join(ws, n))
				if err != nil {
					t.Logf("%s: not created: %v", n, err)
					continue
				}
				if fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
					uid := -1
					if st, ok := fi.Sys().(*syscall.Stat_t); ok {
						uid = int(st.Uid)
					}
					t.Errorf("the host workspace holds %s with mode %v, owned by host uid %d; want no setuid/setgid bit", n, fi.Mode(), uid)
				}
			}
		})
	}
}
