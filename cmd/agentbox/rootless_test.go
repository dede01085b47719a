package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// Rootless mode: the native backend run by an unprivileged user. The tests
// run as root (CI does) and start agentbox as nobody (uid 65534), from a
// copy of the binaries that nobody can reach (the checkout may sit under a
// home directory only root can enter).

// nobody is the unprivileged user the rootless tests run agentbox as.
const nobody = 65534

// rootlessBinaries copies agentbox (and agentbox-init, agentbox-full when
// they sit beside it) into a directory nobody can execute from.
func rootlessBinaries(t *testing.T) string {
	t.Helper()
	requireLinuxSandbox(t)
	src := agentboxBinary(t)
	dir := nobodyDir(t, 0o755)
	for _, name := range []string{filepath.Base(src), "agentbox-init", "agentbox-full"} {
		in, err := os.Open(filepath.Join(filepath.Dir(src), name))
		if err != nil {
			if name == filepath.Base(src) {
				t.Fatal(err)
			}
			continue
		}
		out, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_WRONLY, 0o755)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, in); err != nil {
			t.Fatal(err)
		}
		in.Close()
		if err := out.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, filepath.Base(src))
}

// nobodyDir is a fresh directory directly in the temporary directory
// (t.TempDir's parent is closed to other users), removed at the end.
func nobodyDir(t *testing.T, mode os.FileMode) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "agentbox-rootless-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
	return dir
}

// runAsNobody runs agentbox with args as uid and gid 65534, with a TMPDIR
// of its own, and returns stdout, stderr and the exit status.
func runAsNobody(t *testing.T, bin string, args ...string) (string, string, int) {
	t.Helper()
	tmp := nobodyDir(t, 0o700)
	if err := os.Chown(tmp, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = tmp
	cmd.Env = []string{"PATH=/usr/bin:/bin", "TMPDIR=" + tmp, "HOME=" + tmp}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("run %s as nobody: %v", bin, err)
	}
	return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
}

func TestRootlessExecConfinesTheCommand(t *testing.T) {
	bin := rootlessBinaries(t)
	// A host file nobody could read on the host, outside any workspace.
	secret := filepath.Join(nobodyDir(t, 0o755), "host-secret")
	if err := os.WriteFile(secret, []byte("host data"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A listener on the host's loopback.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	script := `id -u; grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status
echo ws > /workspace/f && echo wrote-workspace
cat ` + secret + ` 2>/dev/null && echo READ-HOST-FILE
echo x > /usr/agentbox-rootless 2>/dev/null && echo WROTE-USR
mount -t tmpfs x /tmp 2>/dev/null && echo MOUNTED
unshare -U true 2>/dev/null && echo MADE-USERNS
ls -d /proc/[0-9]* | wc -l
tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '
python3 -c 'import socket; socket.create_connection(("127.0.0.1", ` + strconv.Itoa(port) + `), 1)' 2>/dev/null && echo REACHED-HOST
exit 0`
	stdout, stderr, code := runAsNobody(t, bin, "exec", "--allow-weaker", "--json", "--", "sh", "-c", script)
	if code != 0 {
		t.Fatalf("rootless exec: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	var res execResult
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout)
	}
	out := res.Stdout
	for _, want := range []string{"1000\n", "CapEff:\t0000000000000000", "CapBnd:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2", "wrote-workspace", "\nlo\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("inside, want %q in:\n%s", want, out)
		}
	}
	for _, escape := range []string{"READ-HOST-FILE", "WROTE-USR", "MOUNTED", "MADE-USERNS", "REACHED-HOST"} {
		if strings.Contains(out, escape) {
			t.Errorf("rootless sandbox let through: %s\n%s", escape, out)
		}
	}
	if _, err := os.Stat("/usr/agentbox-rootless"); err == nil {
		t.Errorf("/usr/agentbox-rootless was created on the host")
	}
	// Only the sandbox's own processes (the init, sh, ls, wc), on the
	// line before the interfaces.
	lines := strings.Split(out, "\n")
	if i := slices.Index(lines, "lo"); i < 1 {
		t.Errorf("no interface list in:\n%s", out)
	} else if n, err := strconv.Atoi(lines[i-1]); err != nil || n > 10 {
		t.Errorf("%q processes visible inside: host processes show", lines[i-1])
	}
	// What could not be enforced was said, not hidden.
	if !strings.Contains(stderr, "NOT enforced") || !strings.Contains(stderr, "resources.memory") {
		t.Errorf("stderr does not warn that the memory limit is not enforced: %q", stderr)
	}
}

func TestRootlessExecRefusesLimitsItCannotEnforceButKeepsTheAllowList(t *testing.T) {
	bin := rootlessBinaries(t)
	// The CLI's default policy has memory and pids limits; an unprivileged
	// user cannot make cgroups on this host, so without --allow-weaker
	// nothing runs.
	stdout, stderr, code := runAsNobody(t, bin, "exec", "--", "sh", "-c", "echo RAN")
	if code != exitCode || strings.Contains(stdout, "RAN") {
		t.Fatalf("exit %d, stdout %q: want 125 and nothing run", code, stdout)
	}
	if !strings.Contains(stderr, "resources.memory") || !strings.Contains(stderr, "--allow-weaker") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("stderr %q: want one line naming resources.memory and --allow-weaker", stderr)
	}
	// An allow-list runs (the egress proxy's listener comes from the
	// init): the proxy is announced, and it refuses a host not listed.
	script := `env | grep -c '^HTTP_PROXY=http://127.0.0.1:'
python3 - <<'PY'
import os, urllib.request
try:
    urllib.request.urlopen("http://not-listed.invalid/", timeout=5)
    print("FETCHED")
except urllib.error.HTTPError as e:
    print("refused", e.code)
except Exception as e:
    print("error", e)
PY`
	stdout, stderr, code = runAsNobody(t, bin, "exec", "--json", "--memory", "0", "--pids", "0", "--network", "example.com", "--", "sh", "-c", script)
	var res execResult
	if err := json.Unmarshal([]byte(stdout), &res); code != 0 || err != nil {
		t.Fatalf("allow-list as nobody: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if !strings.HasPrefix(res.Stdout, "1\n") || !strings.Contains(res.Stdout, "refused 403") {
		t.Errorf("allow-list as nobody: stdout %q; want HTTP_PROXY set and the unlisted host refused (403)", res.Stdout)
	}
}
