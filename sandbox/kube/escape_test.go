//go:build kube

// The escape tests that apply to a Pod: the native backend's attacks
// (internal/attacktest's helper, copied into each session's workspace)
// made from inside kube sessions, each asserting that the attack fails
// and, where the wall is known, which errno stopped it. What does not
// apply, and why, is listed below.

package kube

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
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
//   - egress through the proxy: network.allowlist is refused by name;
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

var (
	helperOnce sync.Once
	helperPath string
	helperErr  error
)

// helperInPod is the attack helper's path inside every session.
const helperInPod = sandbox.DefaultWorkdir + "/.escapetest/attack"

// escapeSession creates a session with the attack helper copied into its
// workspace, closed when the test ends.
func escapeSession(t *testing.T, c *Client, spec sandbox.Spec) sandbox.Session {
	t.Helper()
	helperOnce.Do(func() {
		dir, err := os.MkdirTemp("", "agentbox-kube-escape-")
		if err != nil {
			helperErr = err
			return
		}
		helperPath = filepath.Join(dir, "attack")
		helperErr = attacktest.Build(helperPath)
	})
	if helperErr != nil {
		t.Fatal(helperErr)
	}
	b, err := os.ReadFile(helperPath)
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

// batchFails runs the cases' attacks in one helper process and asserts
// that each fails with one of its errnos.
func batchFails(t *testing.T, s sandbox.Session, cases []escapeCase) {
	t.Helper()
	var list [][]string
	for _, c := range cases {
		list = append(list, c.args)
	}
	results := attacktest.Batch(t, s, helperInPod, list)
	for i, c := range cases {
		t.Run(c.name+" fails", func(t *testing.T) { results[i].Failed(t, c.want...) })
	}
}

type escapeCase struct {
	name string
	want []string
	args []string
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
	if r := podSh(t, s, "mkdir -p /tmp/m/old"); r.ExitCode != 0 {
		t.Fatal(string(r.Stderr))
	}
	ws := sandbox.DefaultWorkdir
	cases := []escapeCase{
		{"mounting a tmpfs", []string{"EPERM"}, []string{"mount-tmpfs", "/tmp/m"}},
		{"binding the root elsewhere", []string{"EPERM"}, []string{"mount-bind", "/", "/tmp/m"}},
		{"remounting the root read-write", []string{"EPERM"}, []string{"remount-rw", "/"}},
		{"unmounting /proc (and what it masks)", []string{"EPERM"}, []string{"umount", "/proc/kcore"}},
		{"unmounting the workspace", []string{"EPERM"}, []string{"umount", ws}},
		{"pivot_root", []string{"EPERM"}, []string{"pivot-root", "/tmp/m", "/tmp/m/old"}},
		{"chroot", []string{"EPERM"}, []string{"chroot", "/tmp/m"}},
		{"fsopen (the new mount API)", []string{"EPERM"}, []string{"fsopen"}},
		{"open_tree of the workspace", []string{"EPERM"}, []string{"open-tree", ws}},
		{"mount_setattr to clear read-only on /usr", []string{"EPERM"}, []string{"mount-setattr-rw", "/usr"}},
		{"unshare(CLONE_NEWUSER)", []string{"EPERM"}, []string{"unshare", "user"}},
		{"clone(CLONE_NEWUSER)", []string{"EPERM"}, []string{"clone-ns", "user"}},
		{"setns into the init's mount namespace", []string{"EPERM"}, []string{"setns", "/proc/1/ns/mnt"}},
	}
	for _, ns := range []string{"mount", "net", "pid", "ipc", "uts", "cgroup"} {
		cases = append(cases, escapeCase{"unshare of a " + ns + " namespace", []string{"EPERM"}, []string{"unshare", ns}})
	}
	batchFails(t, s, cases)
}

func TestEscapeKernelInterfacesAreClosed(t *testing.T) {
	s := escapeSession(t, escapeClient(t), sandbox.Spec{})
	batchFails(t, s, []escapeCase{
		{"keyctl", []string{"EPERM"}, []string{"keyctl"}},
		{"add_key", []string{"EPERM"}, []string{"add-key"}},
		{"bpf", []string{"EPERM"}, []string{"bpf"}},
		{"perf_event_open", []string{"EPERM", "EACCES"}, []string{"perf-event-open"}},
		{"userfaultfd", []string{"EPERM"}, []string{"userfaultfd"}},
		{"kexec_load", []string{"EPERM"}, []string{"kexec-load"}},
		{"init_module", []string{"EPERM"}, []string{"init-module"}},
		{"finit_module", []string{"EPERM"}, []string{"finit-module"}},
		{"reboot", []string{"EPERM"}, []string{"reboot"}},
		{"clock_settime", []string{"EPERM"}, []string{"clock-settime"}},
		{"swapon", []string{"EPERM"}, []string{"swapon"}},
		{"reading the kernel log", []string{"EPERM"}, []string{"syslog"}},
		{"sethostname", []string{"EPERM"}, []string{"sethostname"}},
		{"mknod of a block device", []string{"EPERM"}, []string{"mknod", "/tmp/sda"}},
		{"a raw socket", []string{"EPERM"}, []string{"raw-socket"}},
		{"a packet socket", []string{"EPERM"}, []string{"packet-socket"}},
		{"open_by_handle_at (shocker)", []string{"EPERM"}, []string{"open-by-handle", "/etc/hostname"}},
	})
	t.Run("io_uring", func(t *testing.T) {
		// containerd 1.6's RuntimeDefault allows it: only agentbox's
		// profile refuses it.
		attacktest.Run(t, s, helperInPod, "io-uring").Failed(t, "EPERM")
	})
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
	var cases []escapeCase
	for _, d := range writable {
		if d == sandbox.DefaultWorkdir || d == "/tmp" || d == "/dev/shm" || d == pidDir {
			continue // mounts of their own (find lists a mount point)
		}
		cases = append(cases, escapeCase{"writing into the image's world-writable " + d, []string{"EROFS"}, []string{"write", d + "/planted", "x"}})
	}
	for _, p := range []string{"/planted", "/etc/planted", "/usr/bin/planted", "/bin/sh", "/etc/passwd"} {
		cases = append(cases, escapeCase{"writing " + p, []string{"EROFS", "EACCES"}, []string{"write", p, "x"}})
	}
	for _, p := range []string{"/proc/sys/kernel/core_pattern", "/proc/sys/kernel/modprobe", "/proc/sys/vm/drop_caches",
		"/proc/sysrq-trigger", "/sys/kernel/uevent_helper", "/sys/fs/cgroup/cgroup.procs", "/proc/1/attr/current"} {
		cases = append(cases, escapeCase{"writing " + p, nil, []string{"write", p, "x"}})
	}
	cases = append(cases, escapeCase{"lowering oom_score_adj", []string{"EACCES", "EPERM"}, []string{"write", "/proc/self/oom_score_adj", "-1000"}})
	batchFails(t, s, cases)
	if len(writable) == 0 {
		t.Log("the image has no world-writable directory on its root")
	}
	t.Run("the workspace and /tmp are writable", func(t *testing.T) {
		if r := podSh(t, s, "echo x >"+sandbox.DefaultWorkdir+"/ok && echo x >/tmp/ok"); r.ExitCode != 0 {
			t.Fatalf("exit %d: %s", r.ExitCode, r.Stderr)
		}
	})
}
