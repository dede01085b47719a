package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newSession(t *testing.T, c *Client, spec sandbox.Spec) sandbox.Session {
	t.Helper()
	sess, err := c.Create(testCtx(t), spec)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() { _ = sess.Close(context.Background()) })
	return sess
}

func run(t *testing.T, sess sandbox.Session, script string) sandbox.ExecResult {
	t.Helper()
	res, err := sandbox.Exec(testCtx(t), sess, sandbox.ExecRequest{Cmd: []string{"sh", "-c", script}, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("exec %q: %v", script, err)
	}
	return res
}

// TestConfinementOfTheDefaultPolicy tries each escape in one default
// session and wants it refused by the kernel.
func TestConfinementOfTheDefaultPolicy(t *testing.T) {
	c := testClient(t)
	t.Parallel()
	sess := newSession(t, c, sandbox.Spec{})
	cases := []struct {
		name, script string
		wantExit     int // 0 = must succeed, otherwise must fail
		wantOut      string
	}{
		{"the network has only loopback", `cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '`, 0, "lo\n"},
		{"connecting out is refused", `python3 -c 'import socket; socket.create_connection(("10.1.2.3", 80), timeout=3)'`, 1, ""},
		{"the image root is read-only", `touch /usr/bin/planted`, 1, ""},
		{"/etc is read-only", `echo x >> /etc/passwd`, 1, ""},
		{"/tmp is writable", `touch /tmp/ok && echo ok`, 0, "ok\n"},
		{"the workspace is writable", `touch ok && echo ok`, 0, "ok\n"},
		{"commands run as uid 1000", `id -u; id -g`, 0, "1000\n1000\n"},
		{"no capabilities: chown to root is refused", `touch f && chown 0:0 f`, 1, ""},
		{"no capabilities at all", `grep -E '^Cap(Eff|Prm|Bnd):' /proc/self/status | awk '{print $2}' | sort -u`, 0, "0000000000000000\n"},
		{"no new privileges", `grep NoNewPrivs /proc/self/status | awk '{print $2}'`, 0, "1\n"},
		{"seccomp filter is on", `grep '^Seccomp:' /proc/self/status | awk '{print $2}'`, 0, "2\n"},
		{"ptrace is denied by seccomp", `python3 -c 'import ctypes,sys; l=ctypes.CDLL(None,use_errno=True); r=l.ptrace(0,0,0,0); sys.exit(0 if r==-1 and ctypes.get_errno()==1 else 3)' && echo EPERM`, 0, "EPERM\n"},
		{"a user namespace cannot be created", `python3 -c 'import ctypes,sys; l=ctypes.CDLL(None,use_errno=True); sys.exit(0 if l.unshare(0x10000000)==-1 else 3)' && echo refused`, 0, "refused\n"},
		{"io_uring, keyrings and mount are denied by seccomp", `python3 -c '
import ctypes, sys
l = ctypes.CDLL(None, use_errno=True)
for nr in (425, 250, 165):  # io_uring_setup, keyctl, mount
    if l.syscall(nr, 0, 0, 0, 0, 0) != -1 or ctypes.get_errno() != 1:
        sys.exit("syscall %d not refused with EPERM" % nr)
print("EPERM")
'`, 0, "EPERM\n"},
		{"clone3 is ENOSYS so libc falls back to clone", `python3 -c '
import ctypes
l = ctypes.CDLL(None, use_errno=True)
l.syscall(435, 0, 0)
print(ctypes.get_errno())
'`, 0, "38\n"},
		{"a setuid or setgid mode is refused by seccomp, a plain mode is not", `touch s && chmod 0755 s && echo plain
chmod u+s s 2>/dev/null || echo setuid-refused
chmod g+s s 2>/dev/null || echo setgid-refused`, 0, "plain\nsetuid-refused\nsetgid-refused\n"},
		{"agentbox keeps nothing of its own in /tmp", `true; true; ls -a /tmp | grep -c agentbox || true`, 0, "0\n"},
		{"host processes are invisible", `ls /proc | grep -c '^[0-9]' | awk '{print ($1 < 10) ? "few" : "many"}'`, 0, "few\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, sess, tc.script)
			if tc.wantExit == 0 && res.ExitCode != 0 || tc.wantExit != 0 && res.ExitCode == 0 {
				t.Fatalf("exit %d (want %s), stdout %q, stderr %q", res.ExitCode, map[bool]string{true: "0", false: "non-zero"}[tc.wantExit == 0], res.Stdout, res.Stderr)
			}
			if tc.wantOut != "" && string(res.Stdout) != tc.wantOut {
				t.Fatalf("stdout %q, want %q (stderr %q)", res.Stdout, tc.wantOut, res.Stderr)
			}
		})
	}
}

// TestLimitsAndPathPolicies checks memory, pids, read-only and denied
// paths in one limited session.
func TestLimitsAndPathPolicies(t *testing.T) {
	c := testClient(t)
	t.Parallel()
	ws := t.TempDir()
	for _, d := range []string{"in", "secret"} {
		if err := os.Mkdir(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, d, "x"), []byte("data"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sess := newSession(t, c, sandbox.Spec{Workspace: ws, Policy: sandbox.Policy{
		Resources:  sandbox.Resources{MemoryBytes: 64 << 20, Pids: 40, CPUs: 1},
		Filesystem: sandbox.FilesystemPolicy{ReadOnly: []string{"/workspace/in"}, Deny: []string{"/workspace/secret"}},
	}})
	t.Run("memory past the limit is OOM-killed and reported", func(t *testing.T) {
		res := run(t, sess, `exec python3 -c 'b = bytearray(400 << 20); print(len(b))'`)
		if !res.OOMKilled || res.ExitCode != 137 {
			t.Fatalf("exit %d, OOMKilled %v, stderr %q; want 137 and OOMKilled", res.ExitCode, res.OOMKilled, res.Stderr)
		}
	})
	t.Run("processes are bounded by the pids limit", func(t *testing.T) {
		res := run(t, sess, `exec python3 -c '
import os, time
pids = []
try:
    for i in range(100):
        p = os.fork()
        if p == 0:
            time.sleep(30)
            os._exit(0)
        pids.append(p)
except OSError:
    pass
print(len(pids))
for p in pids:
    os.kill(p, 9)
    os.waitpid(p, 0)
'`)
		n, _ := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
		if n == 0 || n >= 40 {
			t.Fatalf("%d children forked (stdout %q, stderr %q), want fewer than the limit of 40", n, res.Stdout, res.Stderr)
		}
	})
	t.Run("a read-only workspace path refuses writes", func(t *testing.T) {
		if res := run(t, sess, `echo y > in/x`); res.ExitCode == 0 {
			t.Fatal("write to in/x succeeded")
		}
		if res := run(t, sess, `cat in/x`); string(res.Stdout) != "data" {
			t.Fatalf("in/x reads %q", res.Stdout)
		}
		if err := sess.WriteFile(testCtx(t), "in/y", []byte("z"), 0o644); err == nil {
			t.Fatal("WriteFile into the read-only path succeeded")
		}
	})
	t.Run("a denied path is unreadable", func(t *testing.T) {
		if res := run(t, sess, `cat secret/x`); res.ExitCode == 0 || strings.Contains(string(res.Stdout), "data") {
			t.Fatalf("cat secret/x: exit %d, stdout %q", res.ExitCode, res.Stdout)
		}
		if _, err := sess.ReadFile(testCtx(t), "secret/x"); err == nil {
			t.Fatal("ReadFile of the denied path succeeded")
		}
	})
	t.Run("a symlink planted in the workspace reaches neither protected path through the file API", func(t *testing.T) {
		run(t, sess, `ln -s secret/x leak && ln -s in ro-alias`)
		if data, err := sess.ReadFile(testCtx(t), "leak"); err == nil {
			t.Fatalf("ReadFile through a link to the denied path read %q", data)
		}
		if err := sess.WriteFile(testCtx(t), "ro-alias/y", []byte("z"), 0o644); err == nil {
			t.Fatal("WriteFile through a link into the read-only path succeeded")
		}
	})
}

func TestKillEndsTheWholeProcessTree(t *testing.T) {
	c := testClient(t)
	t.Parallel()
	sess := newSession(t, c, sandbox.Spec{})
	ctx := testCtx(t)
	p, err := sess.Start(ctx, sandbox.ExecRequest{Cmd: []string{"sh", "-c", `sleep 301 & (sleep 302 &) ; sh -c 'sleep 303' & echo started; wait`}})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8)
	if _, err := p.Stdout().Read(buf); err != nil {
		t.Fatal(err)
	}
	_ = p.Stdin().Close()
	if err := p.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := p.Wait(ctx)
	if err != nil || st.ExitCode != 137 || st.Signal != "SIGKILL" {
		t.Fatalf("wait: %+v, %v; want exit 137 by SIGKILL", st, err)
	}
	res := run(t, sess, `for p in /proc/[0-9]*; do tr '\0' ' ' < $p/cmdline 2>/dev/null; echo; done | grep -c '^sleep 30[123]' || true`)
	if strings.TrimSpace(string(res.Stdout)) != "0" {
		t.Fatalf("%s sleeps survived the kill", strings.TrimSpace(string(res.Stdout)))
	}
}

func TestAContainerKilledFromOutsideGivesAClearError(t *testing.T) {
	c := testClient(t)
	t.Parallel()
	sess := newSession(t, c, sandbox.Spec{})
	cid, _ := containerOf(sess.State())
	if _, err := c.api.ContainerKill(testCtx(t), cid, client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	_, err := sandbox.Exec(testCtx(t), sess, sandbox.ExecRequest{Cmd: []string{"true"}})
	if !errors.Is(err, sandbox.ErrClosed) || !strings.Contains(err.Error(), "outside agentbox") {
		t.Fatalf("exec after an outside kill: %v; want ErrClosed saying it was killed outside agentbox", err)
	}
}

func TestTheSessionTimeoutEndsTheSession(t *testing.T) {
	c := testClient(t)
	t.Parallel()
	sess := newSession(t, c, sandbox.Spec{Policy: sandbox.Policy{Resources: sandbox.Resources{SessionTimeout: time.Second}}})
	time.Sleep(1500 * time.Millisecond)
	_, err := sandbox.Exec(testCtx(t), sess, sandbox.ExecRequest{Cmd: []string{"true"}})
	if !errors.Is(err, sandbox.ErrTimeout) {
		t.Fatalf("exec after the session timeout: %v; want ErrTimeout", err)
	}
}

func TestBadInputIsRefusedClearly(t *testing.T) {
	c := testClient(t)
	t.Parallel()
	cases := []struct {
		name string
		spec sandbox.Spec
		kind error
		says string
	}{
		{"a missing image is not found and never pulled", sandbox.Spec{Image: "agentbox/no-such-image:0"}, sandbox.ErrNotFound, "never pulls"},
		{"a disk quota on a directory of the user's is refused saying why", sandbox.Spec{Workspace: t.TempDir(), Policy: sandbox.Policy{Resources: sandbox.Resources{DiskBytes: 1 << 30}}}, sandbox.ErrPolicyUnsupported, "only a workspace it makes"},
		{"a non-numeric user is invalid", sandbox.Spec{User: "agent"}, sandbox.ErrInvalid, "uid"},
	}
	// An image without a shell: the base image's files minus sh.
	noShell := "agentbox/test-no-shell:latest"
	if _, err := c.api.ImageInspect(testCtx(t), noShell); err != nil {
		rc, err := c.api.ImageImport(testCtx(t), client.ImageImportSource{Source: emptyTar(t), SourceName: "-"}, noShell, client.ImageImportOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := readImportStream(rc); err != nil {
			t.Fatal(err)
		}
		rc.Close()
	}
	cases = append(cases, struct {
		name string
		spec sandbox.Spec
		kind error
		says string
	}{"an image without /bin/sh is refused saying so", sandbox.Spec{Image: noShell}, sandbox.ErrInvalid, "no usable /bin/sh"})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sess, err := c.Create(testCtx(t), tc.spec)
			if err == nil {
				sess.Close(context.Background())
				t.Fatal("create succeeded")
			}
			if !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("err = %v; want %v saying %q", err, tc.kind, tc.says)
			}
		})
	}
}

func TestAnEngineThatDoesNotAnswerIsUnavailableNamingDockerHost(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "no-engine.sock")
	t.Setenv("DOCKER_HOST", "unix://"+sock)
	_, err := New(Options{})
	if !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(err.Error(), sock+" (from DOCKER_HOST)") {
		t.Fatalf("err = %v; want ErrUnavailable naming DOCKER_HOST", err)
	}
}

func TestGCReapsOrphansAndSparesLiveSessions(t *testing.T) {
	// Not parallel: gc would reap the stopped containers of the tests
	// that kill theirs.
	c := testClient(t)
	live := newSession(t, c, sandbox.Spec{})
	// Detached, stopped for a later Resume: not an orphan. (A session
	// of a process is removed when it stops.)
	stopped := newSession(t, c, sandbox.Spec{Detached: true})
	if err := stopped.Stop(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	// An orphan: labelled as made by a process that has exited.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	created, err := c.api.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config: &container.Config{Image: BaseImage, Cmd: initCmd, Labels: map[string]string{
			labelSession: "dk-orphan-test", labelOwnerPID: strconv.Itoa(dead.Process.Pid), labelOwnerHost: hostname(),
		}},
		HostConfig: &container.HostConfig{NetworkMode: "none"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.removeContainer(context.Background(), created.ID) })
	if _, err := c.api.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatal(err)
	}
	reaped, err := c.GC(ctx, GCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var gotOrphan bool
	for _, r := range reaped {
		if r.Session == live.ID() || r.Session == stopped.ID() {
			t.Errorf("gc reaped the session %s of a live process: %s", r.Session, r.Reason)
		}
		gotOrphan = gotOrphan || r.Session == "dk-orphan-test"
	}
	if !gotOrphan {
		t.Fatalf("gc did not reap the orphan (reaped %+v)", reaped)
	}
	if _, err := c.api.ContainerInspect(ctx, created.ID, client.ContainerInspectOptions{}); err == nil {
		t.Fatal("the orphan container still exists")
	}
	if res := run(t, live, "echo alive"); string(res.Stdout) != "alive\n" {
		t.Fatalf("live session after gc: %q", res.Stdout)
	}
	again, err := c.Resume(ctx, stopped.State())
	if err != nil {
		t.Fatalf("resume of a stopped session after gc: %v", err)
	}
	if res := run(t, again, "echo back"); string(res.Stdout) != "back\n" {
		t.Fatalf("resumed session after gc: %q", res.Stdout)
	}
}

func TestTheEgressAllowListAdmitsListedHostsOnly(t *testing.T) {
	c := testClient(t)
	t.Parallel()
	if why := c.egressSupport(); why != "" {
		testenv.Skipf(t, "network.allowlist not enforceable here: %s", why)
	}
	// A host service on all addresses: the container must not reach it
	// through its gateway, only the proxy.
	l, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			conn.Write([]byte("HTTP/1.0 200 OK\r\n\r\nhost-secret"))
			conn.Close()
		}
	}()
	port := l.Addr().(*net.TCPAddr).Port
	sess := newSession(t, c, sandbox.Spec{Policy: sandbox.Policy{Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkAllowList, Allow: []string{"example.com"}}}})
	cases := []struct {
		name, script, want string
	}{
		{"the proxy is announced in the environment", `case "$HTTPS_PROXY" in http://*:*) echo set;; esac`, "set\n"},
		{"an unlisted host is refused by the proxy", `python3 -c '
import urllib.request, urllib.error
try:
    urllib.request.urlopen("http://unlisted.invalid/", timeout=10)
except urllib.error.HTTPError as e:
    print(e.code)
'`, "403\n"},
		{"DNS does not resolve inside", `python3 -c '
import socket
try:
    socket.getaddrinfo("example.com", 80); print("resolved")
except OSError:
    print("no dns")
'`, "no dns\n"},
		{"a host service behind the gateway is unreachable", fmt.Sprintf(`python3 -c '
import os, socket
gw = os.environ["HTTP_PROXY"].split("//")[1].split(":")[0]
try:
    socket.create_connection((gw, %d), timeout=3); print("reached")
except OSError:
    print("blocked")
'`, port), "blocked\n"},
		{"a direct connection out is impossible", `python3 -c '
import socket
try:
    socket.create_connection(("1.1.1.1", 80), timeout=3); print("reached")
except OSError:
    print("blocked")
'`, "blocked\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, sess, tc.script)
			if string(res.Stdout) != tc.want {
				t.Fatalf("stdout %q, want %q (stderr %q)", res.Stdout, tc.want, res.Stderr)
			}
		})
	}
	res := run(t, sess, `python3 -c 'import urllib.request; urllib.request.urlopen("http://denied.invalid/", timeout=10)' 2>/dev/null; true`)
	if len(res.Violations) == 0 {
		t.Errorf("a refused request left no violation in the exit status")
	}
}

// emptyTar is a tar archive holding one empty directory.
func emptyTar(t *testing.T) io.Reader {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "etc/", Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	tw.Close()
	return &buf
}

func TestResumeRestartsAStoppedContainerAndRebuildRecreatesARemovedOne(t *testing.T) {
	c := testClient(t)
	t.Parallel()
	ctx := testCtx(t)
	// Detached: the engine removes a session of a process once it stops.
	sess := newSession(t, c, sandbox.Spec{Detached: true})
	if err := sess.WriteFile(ctx, "kept.txt", []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	st := sess.State()
	t.Run("after Stop Resume starts the same container again", func(t *testing.T) {
		if err := sess.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		again, err := c.Resume(ctx, st)
		if err != nil {
			t.Fatalf("resume: %v", err)
		}
		if again.ID() != st.ID {
			t.Fatalf("resume gave session %s, want %s", again.ID(), st.ID)
		}
		if res := run(t, again, "cat kept.txt"); string(res.Stdout) != "kept" {
			t.Fatalf("cat kept.txt after resume: %q (stderr %q)", res.Stdout, res.Stderr)
		}
	})
	t.Run("after the container is removed the session is gone and Rebuild recreates it over the workspace", func(t *testing.T) {
		if err := c.removeContainer(ctx, mustContainer(t, st)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Resume(ctx, st); !errors.Is(err, sandbox.ErrGone) {
			t.Fatalf("resume: err = %v, want ErrGone", err)
		}
		again, err := c.Rebuild(ctx, st)
		if err != nil {
			t.Fatalf("rebuild: %v", err)
		}
		if again.ID() == st.ID {
			t.Fatalf("the rebuilt session kept the id %s", st.ID)
		}
		st = again.State()
		if res := run(t, again, "cat kept.txt"); string(res.Stdout) != "kept" {
			t.Fatalf("cat kept.txt after rebuild: %q (stderr %q)", res.Stdout, res.Stderr)
		}
	})
	if err := c.Delete(ctx, st); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(st.Workspace); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Delete left the owned workspace %s: %v", st.Workspace, err)
	}
	if _, err := c.api.ContainerInspect(ctx, mustContainer(t, st), client.ContainerInspectOptions{}); err == nil {
		t.Fatal("Delete left the container")
	}
}

// mustContainer is the container id st names.
func mustContainer(t testing.TB, st sandbox.State) string {
	t.Helper()
	cid, err := containerOf(st)
	if err != nil {
		t.Fatal(err)
	}
	return cid
}
