package escapetest

import (
	"context"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/attacktest"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
	"golang.org/x/sys/unix"
)

func TestACommandHoldsNoPrivilege(t *testing.T) {
	want := []struct{ name, line string }{
		{"no effective capabilities", "CapEff:\t0000000000000000"},
		{"no permitted capabilities", "CapPrm:\t0000000000000000"},
		{"no inheritable capabilities", "CapInh:\t0000000000000000"},
		{"an empty bounding set", "CapBnd:\t0000000000000000"},
		{"no ambient capabilities", "CapAmb:\t0000000000000000"},
		{"no_new_privs is set", "NoNewPrivs:\t1"},
		{"a seccomp filter is installed", "Seccomp:\t2"},
	}
	for _, who := range bothUsers(t) {
		t.Run(who.name, func(t *testing.T) {
			r := sh(t, who.s, "cat /proc/self/status")
			for _, w := range want {
				t.Run(w.name, func(t *testing.T) {
					if !strings.Contains(string(r.Stdout), w.line+"\n") {
						t.Errorf("/proc/self/status lacks %q:\n%s", w.line, r.Stdout)
					}
				})
			}
		})
	}
	t.Run("the default user is not root", func(t *testing.T) {
		if r := sh(t, shared(t), "id -u"); strings.TrimSpace(string(r.Stdout)) != "1000" {
			t.Errorf("id -u = %q, want 1000", r.Stdout)
		}
	})
}

func TestASetuidBinaryGainsNothing(t *testing.T) {
	s := shared(t)
	ws := s.State().Workspace
	copyHelper := func(t *testing.T, name string) string {
		t.Helper()
		b, err := os.ReadFile(hostHelper)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(ws, name)
		if err := os.WriteFile(p, b, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, 0, 0); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Run("a setuid-root copy of the helper planted in the workspace", func(t *testing.T) {
		skipRootless(t, "an unprivileged user cannot plant a setuid-root file")
		p := copyHelper(t, "suid-attack")
		if err := os.Chmod(p, os.ModeSetuid|0o755); err != nil {
			t.Fatal(err)
		}
		if fi, _ := os.Stat(p); fi.Mode()&os.ModeSetuid == 0 {
			t.Fatal("the setuid bit did not stick on the host")
		}
		r := execIn(t, s, sandbox.ExecRequest{Cmd: []string{"/workspace/suid-attack", "ids"}})
		got, out := parseResult(t, []string{"ids"}, r)
		if got == "ok" || !strings.Contains(out, "euid=1000") {
			t.Fatalf("ESCAPE: the setuid-root binary ran with a new identity:\n%s", out)
		}
		if !strings.Contains(out, "CapEff:\t0000000000000000") {
			t.Errorf("the setuid binary holds capabilities:\n%s", out)
		}
	})
	t.Run("a copy of the helper with file capabilities (cap_net_raw+ep)", func(t *testing.T) {
		skipRootless(t, "an unprivileged user cannot plant a file with capabilities")
		p := copyHelper(t, "fcap-attack")
		// struct vfs_cap_data, revision 2, effective, permitted = CAP_NET_RAW.
		xattr := make([]byte, 20)
		binary.LittleEndian.PutUint32(xattr[0:], 0x02000000|1)
		binary.LittleEndian.PutUint32(xattr[4:], 1<<unix.CAP_NET_RAW)
		if err := unix.Setxattr(p, "security.capability", xattr, 0); err != nil {
			testenv.Skipf(t, "the host filesystem of the workspace takes no file capabilities: %v", err)
		}
		attacktest.Run(t, s, "/workspace/fcap-attack", "raw-socket").Failed(t, "EPERM")
		r := execIn(t, s, sandbox.ExecRequest{Cmd: []string{"/workspace/fcap-attack", "ids"}})
		if !strings.Contains(string(r.Stdout), "CapEff:\t0000000000000000") {
			t.Errorf("the file-capability binary holds capabilities:\n%s", r.Stdout)
		}
	})
	t.Run("the host's setuid-root su", func(t *testing.T) {
		if fi, err := os.Stat("/usr/bin/su"); err != nil || fi.Mode()&os.ModeSetuid == 0 {
			testenv.Skipf(t, "the host has no setuid-root /usr/bin/su")
		}
		// su waits for a password on its terminal; meanwhile its
		// credentials show whether the setuid bit took effect.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		p, err := s.Start(ctx, sandbox.ExecRequest{Cmd: []string{"su", "root", "-c", "id"}, TTY: true})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Kill(ctx)
		go io.Copy(io.Discard, p.Stdout())
		var uids string
		for i := 0; i < 100 && uids == ""; i++ {
			time.Sleep(20 * time.Millisecond)
			r := sh(t, s, `for f in /proc/[0-9]*/status; do grep -q '^Name:	su$' $f && grep '^Uid:' $f; done`)
			uids = strings.TrimSpace(string(r.Stdout))
		}
		if uids == "" {
			t.Fatal("su never showed up in /proc")
		}
		if f := strings.Fields(uids); len(f) != 5 || f[2] != "1000" || f[3] != "1000" {
			t.Fatalf("ESCAPE: su runs with uids %q (real, effective, saved, fs), want all 1000", uids)
		}
		t.Logf("su runs as %q", uids)
	})
}

func TestInheritingAHostDescriptorFails(t *testing.T) {
	for _, who := range bothUsers(t) {
		t.Run(who.name, func(t *testing.T) {
			// containermaxprocs=0: the Go runtime of the helper would
			// otherwise keep its own cgroup files open.
			r := execIn(t, who.s, sandbox.ExecRequest{Cmd: []string{helper, "fds"}, Env: map[string]string{"GODEBUG": "containermaxprocs=0,updatemaxprocs=0"}})
			if got, out := parseResult(t, []string{"fds"}, r); got == "ok" {
				t.Fatalf("ESCAPE: a command inherited descriptors beyond stdio:\n%s", out)
			}
		})
	}
	t.Run("host descriptors left open without close-on-exec", func(t *testing.T) {
		// A program embedding agentbox may hold descriptors it inherited
		// without FD_CLOEXEC (a shell's exec 5</, a supervisor's
		// sockets). The sandbox must not inherit them: a host directory
		// or file opened outside is reachable whatever the mount view
		// and landlock say (they check paths, not open descriptors).
		planted, want := plantHostSecret(t, "")
		victim := filepath.Join(filepath.Dir(planted), "victim.txt")
		if err := os.WriteFile(victim, []byte("unchanged"), 0o644); err != nil {
			t.Fatal(err)
		}
		// High numbers, as inherited descriptors would have, clear of
		// the descriptors the backend passes on purpose.
		const dirFD, fileFD = 77, 78
		leak := func(path string, flags, fd int) {
			t.Helper()
			f, err := unix.Open(path, flags|unix.O_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := unix.Dup3(f, fd, 0); err != nil {
				t.Fatal(err)
			}
			unix.Close(f)
		}
		leak(filepath.Dir(planted), unix.O_RDONLY|unix.O_DIRECTORY, dirFD)
		leak(victim, unix.O_RDWR, fileFD)
		s := newSession(t, sandbox.Spec{})
		unix.Close(dirFD)
		unix.Close(fileFD)
		for _, a := range [][]string{{"openat-leaked", "secret.txt"}, {"abuse-leaked"}} {
			r := execIn(t, s, sandbox.ExecRequest{Cmd: append([]string{helper}, a...)})
			got, out := parseResult(t, a, r)
			if got == "ok" || strings.Contains(out, want) {
				t.Errorf("ESCAPE: descriptors the host process held without FD_CLOEXEC reached the sandbox (%s):\n%s", a[0], out)
			}
		}
		if b, _ := os.ReadFile(victim); string(b) != "unchanged" {
			t.Errorf("ESCAPE: the host's %s was overwritten through a leaked descriptor: %q", victim, b)
		}
	})
	t.Run("the init's descriptors are out of reach", func(t *testing.T) {
		for _, who := range bothUsers(t) {
			r := sh(t, who.s, "ls -l /proc/1/fd/ && cat /proc/1/fd/*")
			if r.ExitCode == 0 {
				t.Errorf("%s: the init's descriptors are listable:\n%s", who.name, r.Stdout)
			}
		}
	})
}
