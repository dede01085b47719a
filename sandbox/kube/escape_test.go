//go:build kube

// The escape tests that apply to a Pod: the native backend's attacks
// (internal/attacktest's helper, copied into each session's workspace,
// and its lists of kernel attacks) made from inside kube sessions, each
// asserting that the attack fails and, where the wall is known, which
// errno stopped it. What does not apply, and why, is listed below.

package kube

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/attacktest"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/seccomp"
)

// The native backend's attacks that do not apply to a Pod, and why:
//   - a fork bomb: resources.pids is not claimed (a per-node kubelet
//     setting; the test node sets no podPidsLimit), and one would
//     exhaust the node;
//   - reaching the network with network none: the deny-all policy each
//     session proves at create, tested in netproof_test.go and by the
//     conformance suite (NetworkNoneByPolicy);
//   - read-only and deny paths: refused by name;
//   - root inside the sandbox: user 0 is refused (runAsNonRoot), so
//     every attack runs as uid 1000;
//   - host descriptors, the host agentbox binary and state files,
//     planted setuid-root files: the node's runtime starts the Pod, not
//     this process, and no host directory can be mounted in;
//   - ptrace of the session's init: it is the session's own sh, with the
//     commands' uid, in the Pod's pid namespace;
//   - TIOCSTI: an exec's terminal is a pty in the Pod that only the
//     session's own commands read.

// kubeletDir is the test node's kubelet root directory (kube-up.sh's):
// $AGENTBOX_KUBELET_DIR, else /var/lib/agentbox-kube/kubelet.
func kubeletDir() string {
	if d := os.Getenv("AGENTBOX_KUBELET_DIR"); d != "" {
		return d
	}
	return "/var/lib/agentbox-kube/kubelet"
}

// escapeProfile is the name of agentbox's seccomp profile on the test
// node, relative to the kubelet's seccomp directory.
const escapeProfile = "agentbox/escapetest.json"

// escapeClient is a client whose Pods run under agentbox's seccomp
// profile, which the test installs on the node (this host) as an
// operator would (Options.SeccompProfile).
func escapeClient(t *testing.T) *Client {
	t.Helper()
	c := testClient(t, Options{})
	dir := filepath.Join(kubeletDir(), "seccomp")
	if _, err := os.Stat(kubeletDir()); err != nil {
		testenv.Skipf(t, "the test node's kubelet directory is not on this host (set AGENTBOX_KUBELET_DIR): %v", err)
	}
	b, err := seccomp.Profile(runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, escapeProfile)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatalf("install the seccomp profile on the node: %v", err)
	}
	opts := c.opts
	opts.SeccompProfile = escapeProfile
	c, err = New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// helperBinary is the attack helper, built on the first escape test's
// use and removed after the tests.
var helperBinary attacktest.Binary

func TestMain(m *testing.M) {
	code := m.Run()
	if err := helperBinary.Remove(); err != nil {
		fmt.Fprintln(os.Stderr, "kube tests:", err)
		code = 1
	}
	os.Exit(code)
}

// helperInPod is the attack helper's path inside every session.
const helperInPod = sandbox.DefaultWorkdir + "/.escapetest/attack"

// escapeSession creates a session with the attack helper copied into its
// workspace, closed when the test ends.
func escapeSession(t *testing.T, c *Client, spec sandbox.Spec) sandbox.Session {
	t.Helper()
	helper, err := helperBinary.Path()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(helper)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	spec.AllowWeaker = true
	s, err := c.Create(ctx, spec)
	if err != nil {
		t.Fatalf("create a session: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(context.Background()); err != nil {
			t.Errorf("close the session: %v", err)
		}
	})
	if err := s.WriteFile(ctx, helperInPod, b, 0o755); err != nil {
		t.Fatalf("copy the attack helper into the session: %v", err)
	}
	return s
}

// podSh runs a shell script in s.
func podSh(t *testing.T, s sandbox.Session, script string) sandbox.ExecResult {
	t.Helper()
	return attacktest.Exec(t, s, sandbox.ExecRequest{Cmd: []string{"sh", "-c", script}})
}

// refused runs attacks (internal/attacktest's lists, or a test's own)
// in one helper process in s and asserts that each is refused as its
// entry says.
func refused(t *testing.T, s sandbox.Session, attacks []attacktest.Attack) {
	t.Helper()
	attacktest.Refused(t, s, helperInPod, attacks)
}

func TestEscapeACommandHoldsNoPrivilege(t *testing.T) {
	s := escapeSession(t, escapeClient(t), sandbox.Spec{})
	o := attacktest.Run(t, s, helperInPod, "ids")
	for _, line := range []string{
		"uid=1000 euid=1000",
		"CapInh:\t0000000000000000", "CapPrm:\t0000000000000000", "CapEff:\t0000000000000000",
		"CapBnd:\t0000000000000000", "CapAmb:\t0000000000000000",
		"NoNewPrivs:\t1", "Seccomp:\t2",
	} {
		if !strings.Contains(o.Out, line+"\n") && !strings.Contains(o.Out, line+" ") {
			t.Errorf("the command's identity lacks %q:\n%s", line, o.Out)
		}
	}
	// No setuid or setgid file in the Pod could lift that (and with
	// no_new_privs one would not): the user cannot make one owned by
	// another, and the image's are listed here.
	if r := podSh(t, s, "find / -xdev -perm /6000 -type f 2>/dev/null"); len(strings.TrimSpace(string(r.Stdout))) > 0 {
		t.Logf("setuid/setgid files in the image (inert under no_new_privs): %s", r.Stdout)
	}
}

func TestEscapeMountingAndNamespacesFail(t *testing.T) {
	s := escapeSession(t, escapeClient(t), sandbox.Spec{})
	if r := podSh(t, s, "mkdir -p "+attacktest.MountScratch+"/old"); r.ExitCode != 0 {
		t.Fatal(string(r.Stderr))
	}
	refused(t, s, append(append([]attacktest.Attack{}, attacktest.Mounts...), attacktest.Namespaces...))
}

// The kernel's attack surface, internal/attacktest's list: io_uring is
// the one that containerd 1.6's RuntimeDefault profile lets through, and
// only agentbox's profile (escapeClient's) refuses.
func TestEscapeKernelInterfacesAreClosed(t *testing.T) {
	refused(t, escapeSession(t, escapeClient(t), sandbox.Spec{}), attacktest.Kernel)
}

// A node without the profile the client names fails the Pod's start, and
// Create says so, naming the profile.
func TestAMissingSeccompProfileFailsCreateSayingWhy(t *testing.T) {
	c := escapeClient(t)
	opts := c.opts
	opts.SeccompProfile = "agentbox/not-installed.json"
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := c.Create(ctx, sandbox.Spec{AllowWeaker: true})
	if err == nil {
		s.Close(ctx)
		t.Fatal("a Pod with a seccomp profile missing on the node started")
	}
	if !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(err.Error(), "not-installed.json") {
		t.Fatalf("create = %v, want ErrUnavailable naming the profile", err)
	}
	t.Log(err)
}

func TestEscapeWritingOutsideTheWorkspaceFails(t *testing.T) {
	s := escapeSession(t, escapeClient(t), sandbox.Spec{})
	// Directories of the image that the session's user could write were
	// the root read-write (world-writable ones such as /var/tmp): only
	// the read-only root (EROFS) stops a write there.
	r := podSh(t, s, "find / -xdev -type d -perm -0002 2>/dev/null")
	writable := strings.Fields(string(r.Stdout))
	var cases []attacktest.Attack
	for _, d := range writable {
		if d == sandbox.DefaultWorkdir || d == "/tmp" || d == "/dev/shm" || d == pidDir {
			continue // mounts of their own (find lists a mount point)
		}
		cases = append(cases, attacktest.Attack{Name: "writing into the image's world-writable " + d, Args: []string{"write", d + "/planted", "x"}, Refusal: []string{"EROFS"}})
	}
	for _, p := range []string{"/planted", "/etc/planted", "/usr/bin/planted", "/bin/sh", "/etc/passwd"} {
		cases = append(cases, attacktest.Attack{Name: "writing " + p, Args: []string{"write", p, "x"}, Refusal: []string{"EROFS", "EACCES"}})
	}
	for _, a := range attacktest.KernelWrites {
		if a.Name == "writing /proc/1/mem" {
			// Not an attack in a Pod: its pid 1 is the session's own
			// sh, run with the commands' uid in the Pod's pid
			// namespace, so its memory is the session's own.
			t.Logf("not applicable to a Pod: %s", a.Name)
			continue
		}
		cases = append(cases, a)
	}
	refused(t, s, cases)
	if len(writable) == 0 {
		t.Log("the image has no world-writable directory on its root")
	}
	t.Run("the workspace and /tmp are writable", func(t *testing.T) {
		if r := podSh(t, s, "echo x >"+sandbox.DefaultWorkdir+"/ok && echo x >/tmp/ok"); r.ExitCode != 0 {
			t.Fatalf("exit %d: %s", r.ExitCode, r.Stderr)
		}
	})
}
