package linux

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
)

func TestTheHostEnvironmentIsNotInherited(t *testing.T) {
	t.Setenv("AGENTBOX_HOST_SECRET", "s3cret")
	c := newTestClient(t)
	s := newTestSession(t, c, sandbox.Spec{Env: map[string]string{"FROM_SPEC": "yes"}})
	res, err := sandbox.Exec(context.Background(), s, sandbox.ExecRequest{Cmd: []string{"env"}, Env: map[string]string{"FROM_REQ": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	env := string(res.Stdout)
	if strings.Contains(env, "s3cret") {
		t.Errorf("host variable leaked into the sandbox:\n%s", env)
	}
	for _, want := range []string{"FROM_SPEC=yes", "FROM_REQ=1", "PATH=", "HOME="} {
		if !strings.Contains(env, want) {
			t.Errorf("env lacks %s:\n%s", want, env)
		}
	}
}

func TestFilesystemLayout(t *testing.T) {
	c := newTestClient(t)
	secret := filepath.Join(t.TempDir(), "host-secret")
	if err := os.WriteFile(secret, []byte("top secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	ro := t.TempDir()
	if err := os.WriteFile(filepath.Join(ro, "input.csv"), []byte("a,b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rw := t.TempDir()
	if err := os.Chmod(rw, 0o777); err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, "private"), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "private", "key"), []byte("hidden"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(ws, 0o777); err != nil {
		t.Fatal(err)
	}
	s := newTestSession(t, c, sandbox.Spec{
		Workspace: ws,
		Mounts: []sandbox.Mount{
			{Source: ro, Target: "/workspace/data", ReadOnly: true},
			{Source: rw, Target: "/mnt/out"},
		},
		Policy: sandbox.Policy{Filesystem: sandbox.FilesystemPolicy{Deny: []string{"/workspace/private"}}},
	})
	cases := []struct {
		name string
		cmd  string
		ok   bool
	}{
		{"a host file outside the workspace is invisible", "cat " + secret, false},
		{"the workspace is writable", "echo hi > /workspace/new && cat /workspace/new", true},
		{"a read-only mount is readable", "cat /workspace/data/input.csv", true},
		{"a read-only mount is not writable", "echo x > /workspace/data/input.csv", false},
		{"a read-only mount cannot gain files", "touch /workspace/data/more", false},
		{"a read-write mount is writable", "echo x > /mnt/out/result", true},
		{"a denied path is unreadable", "cat /workspace/private/key", false},
		{"the tool directories are read-only", "touch /usr/bin/evil", false},
		{"/etc is read-only", "echo x >> /etc/passwd", false},
		{"/tmp is writable", "echo x > /tmp/t && cat /tmp/t", true},
		{"/proc/sys is read-only", "echo 1 > /proc/sys/kernel/panic", false},
		{"/proc/kcore is masked", "head -c1 /proc/kcore", false},
		{"/sys is absent", "ls /sys/kernel", false},
		{"host processes are invisible", "test $(ls -d /proc/[0-9]* | wc -l) -lt 6", true},
		{"the init cannot be signalled", "kill -9 1", false},
		{"the user is unprivileged", "test $(id -u) = 1000", true},
		{"no capabilities are held", "grep -q '^CapEff:\t0000000000000000' /proc/self/status && grep -q '^CapBnd:\t0000000000000000' /proc/self/status", true},
		{"no_new_privs is set", "grep -q '^NoNewPrivs:\t1' /proc/self/status", true},
		{"seccomp filters the command", "grep -q '^Seccomp:\t2' /proc/self/status", true},
		{"/dev holds only the minimal devices", "test ! -e /dev/sda && test ! -e /dev/mem && test -c /dev/null", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, s, "sh", "-c", tc.cmd)
			if ok := res.ExitCode == 0; ok != tc.ok {
				t.Errorf("exit %d, want success=%v; stdout %q stderr %q", res.ExitCode, tc.ok, res.Stdout, res.Stderr)
			}
		})
	}
	if b, err := os.ReadFile(filepath.Join(ro, "input.csv")); err != nil || string(b) != "a,b\n" {
		t.Errorf("read-only source changed: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(rw, "result")); err != nil {
		t.Errorf("write to the read-write mount did not reach the host: %v", err)
	}
}

func TestNetworkNoneHasOnlyLoopback(t *testing.T) {
	c := newTestClient(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("host listener\n"))
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	s := newTestSession(t, c, sandbox.Spec{})
	// bash's /dev/tcp would be simplest, but sh may be dash: use the
	// sandbox's own loopback with a python-free probe through /proc.
	res := run(t, s, "sh", "-c", "cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '")
	if got := strings.TrimSpace(string(res.Stdout)); got != "lo" {
		t.Errorf("interfaces = %q, want only lo", got)
	}
	if _, err := os.Stat("/usr/bin/bash"); err == nil {
		res = run(t, s, "bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/"+strconv.Itoa(port)+" && cat <&3")
		if strings.Contains(string(res.Stdout), "host listener") {
			t.Errorf("reached the host's 127.0.0.1:%d from the sandbox", port)
		}
	}
}

func TestPolicyPathsThroughSymlinksAreRefused(t *testing.T) {
	c := newTestClient(t)
	ws := t.TempDir()
	if err := os.Symlink("/etc", filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		spec sandbox.Spec
	}{
		{"a denied path", sandbox.Spec{Workspace: ws, Policy: sandbox.Policy{Filesystem: sandbox.FilesystemPolicy{Deny: []string{"/workspace/link/passwd"}}}}},
		{"a read-only path", sandbox.Spec{Workspace: ws, Policy: sandbox.Policy{Filesystem: sandbox.FilesystemPolicy{ReadOnly: []string{"/workspace/link"}}}}},
		{"a mount target", sandbox.Spec{Workspace: ws, Mounts: []sandbox.Mount{{Source: t.TempDir(), Target: "/workspace/link/x"}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := c.Create(context.Background(), tc.spec)
			if err == nil {
				s.Close(context.Background())
				t.Fatal("create succeeded")
			}
			if !strings.Contains(err.Error(), "symbolic link") {
				t.Errorf("err = %v, want a refusal naming the link", err)
			}
		})
	}
}

// Landlock is the second wall: its rules name the session's writable
// places (made while the root is built, before pivot_root, so they must
// hold the inodes mounted there) and nothing else. Each writable place
// takes a write; /proc/self/comm, which the mount layout leaves writable
// to its own process, does not.
func TestLandlockAllowsWritesOnlyWhereTheSessionWrites(t *testing.T) {
	c := newTestClient(t)
	rw := t.TempDir()
	if err := os.Chmod(rw, 0o777); err != nil {
		t.Fatal(err)
	}
	s := newTestSession(t, c, sandbox.Spec{Mounts: []sandbox.Mount{{Source: rw, Target: "/mnt/rw"}}})
	if !strings.HasPrefix(s.(*session).h.Landlock, "landlock ABI") {
		testenv.Skipf(t, "no landlock here: %s", s.(*session).h.Landlock)
	}
	for _, p := range []string{"/workspace/f", "/tmp/f", "/dev/shm/f", "/mnt/rw/f", "/dev/null"} {
		res := run(t, s, "sh", "-c", "echo x > "+p)
		if res.ExitCode != 0 {
			t.Errorf("write to %s refused: %s", p, res.Stderr)
		}
	}
	res := run(t, s, "sh", "-c", "echo x > /proc/self/comm")
	if res.ExitCode == 0 || !strings.Contains(string(res.Stderr), "Permission denied") {
		t.Errorf("write to /proc/self/comm: exit %d, %q; want landlock's refusal", res.ExitCode, res.Stderr)
	}
}
