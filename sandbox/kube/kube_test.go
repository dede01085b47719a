//go:build kube

// The kube backend's tests run against a real cluster (scripts/kube-up.sh
// starts one on this host) and are built only with -tags kube, so that a
// plain go test ./... needs no cluster; scripts/test.sh (make test, CI)
// starts one and runs go test -tags kube ./sandbox/kube.

package kube

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/sandboxtest"
	"github.com/agentbox/agentbox/snapshot"
)

// testNamespace holds the tests' Pods.
const testNamespace = "agentbox-test"

// kubeconfig is the cluster's: $AGENTBOX_KUBECONFIG, else kube-up.sh's.
func kubeconfig() string {
	if p := os.Getenv("AGENTBOX_KUBECONFIG"); p != "" {
		return p
	}
	return "/var/lib/agentbox-kube/admin.kubeconfig"
}

// testClient connects to the test cluster, making the test namespace, or
// skips (fails in CI) when no cluster answers.
func testClient(t testing.TB, opts Options) *Client {
	t.Helper()
	opts.Kubeconfig = kubeconfig()
	opts.Namespace = "default"
	c, err := New(opts)
	if err != nil {
		testenv.Skipf(t, "no cluster answers (start one with scripts/kube-up.sh): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = c.cs.CoreV1().Namespaces().Get(ctx, testNamespace, metav1.GetOptions{})
	if err != nil {
		_, err = c.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNamespace}}, metav1.CreateOptions{})
		if err != nil && !strings.Contains(err.Error(), "already exists") {
			t.Fatalf("create namespace %s: %v", testNamespace, err)
		}
	}
	// The namespace's default service account, which admission wants,
	// comes from the controller manager a moment later.
	for {
		if _, err := c.cs.CoreV1().ServiceAccounts(testNamespace).Get(ctx, "default", metav1.GetOptions{}); err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("namespace %s has no default service account", testNamespace)
		}
		time.Sleep(100 * time.Millisecond)
	}
	opts.Namespace = testNamespace
	if c, err = New(opts); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestConformance(t *testing.T) {
	testClient(t, Options{})
	store, err := snapshot.Open(t.TempDir(), snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sandboxtest.Run(t, func(t *testing.T) sandbox.Client {
		return testClient(t, Options{Snapshots: store})
	}, sandboxtest.WithSnapshots(store),
		sandboxtest.WithSpec(func(sp *sandbox.Spec) {
			// A Pod's workspace is an emptyDir: a host directory is
			// refused by name.
			sp.Workspace = ""
		}),
		sandboxtest.NetworkNoneByPolicy("a Pod keeps its interface; a deny-all NetworkPolicy, proved at create, blocks it"),
		sandboxtest.NoPause("a Pod cannot be frozen through the Kubernetes API"),
		sandboxtest.NoPorts("a port inside a Pod would be reached through pods/portforward, which the backend does not implement yet"),
		sandboxtest.NoWatch("the workspace is an emptyDir in the Pod, not a directory of this host"))
}

// TestPodIsConfined checks the Pod object the API server holds: the
// fields that confine the session, as the package comment promises.
func TestPodIsConfined(t *testing.T) {
	c := testClient(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sess, err := c.Create(ctx, sandbox.Spec{
		AllowWeaker: true,
		User:        "1234:2345",
		Policy: sandbox.Policy{Resources: sandbox.Resources{
			MemoryBytes: 128 << 20, CPUs: 0.5, DiskBytes: 32 << 20, SessionTimeout: 90 * time.Second,
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close(context.Background())
	st := sess.State()
	var h handles
	if err := sandbox.DecodeHandles(st, &h, nil); err != nil {
		t.Fatal(err)
	}
	pod, err := c.cs.CoreV1().Pods(h.Namespace).Get(ctx, h.Pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctr := pod.Spec.Containers[0]
	sc := ctr.SecurityContext
	switch {
	case sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 1234 || *sc.RunAsGroup != 2345:
		t.Errorf("runAsUser/Group: %+v", sc)
	case sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot:
		t.Errorf("runAsNonRoot not set")
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Errorf("allowPrivilegeEscalation not false")
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Errorf("readOnlyRootFilesystem not set")
	case sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL":
		t.Errorf("capabilities: %+v", sc.Capabilities)
	case sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Errorf("seccomp: %+v", sc.SeccompProfile)
	}
	if pod.Spec.ActiveDeadlineSeconds == nil || *pod.Spec.ActiveDeadlineSeconds != 90 {
		t.Errorf("activeDeadlineSeconds = %v, want 90", pod.Spec.ActiveDeadlineSeconds)
	}
	if pod.Spec.AutomountServiceAccountToken == nil || *pod.Spec.AutomountServiceAccountToken {
		t.Errorf("the service account token is mounted")
	}
	// Memory is the policy's plus the tmpfs workspace's size.
	if got := ctr.Resources.Limits.Memory().Value(); got != (128+32)<<20 {
		t.Errorf("memory limit %d", got)
	}
	if got := ctr.Resources.Limits.Cpu().MilliValue(); got != 500 {
		t.Errorf("cpu limit %dm", got)
	}
	var ws *corev1.Volume
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].Name == "workspace" {
			ws = &pod.Spec.Volumes[i]
		}
	}
	if ws == nil || ws.EmptyDir == nil || ws.EmptyDir.SizeLimit == nil || ws.EmptyDir.SizeLimit.Value() != 32<<20 {
		t.Errorf("workspace volume: %+v", ws)
	}
	for _, l := range []string{labelManagedBy, labelSession, labelHost, labelPid} {
		if pod.Labels[l] == "" {
			t.Errorf("label %s missing: %v", l, pod.Labels)
		}
	}
	np, err := c.cs.NetworkingV1().NetworkPolicies(h.Namespace).Get(ctx, h.Pod, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the deny-all network policy of a network-none session: %v", err)
	}
	if len(np.Spec.Ingress) != 0 || len(np.Spec.Egress) != 0 || len(np.Spec.PolicyTypes) != 2 || np.Spec.PodSelector.MatchLabels[labelSession] != sess.ID() {
		t.Errorf("network policy allows something: %+v", np.Spec)
	}
	// Inside: the uid, and the disk bound (a tmpfs of 32 MiB).
	res, err := sandbox.Exec(ctx, sess, sandbox.ExecRequest{Cmd: []string{"sh", "-c", "id -u; id -g; dd if=/dev/zero of=big bs=1M count=64 2>/dev/null; echo $?"}})
	if err != nil {
		t.Fatal(err)
	}
	if f := strings.Fields(string(res.Stdout)); len(f) != 3 || f[0] != "1234" || f[1] != "2345" || f[2] == "0" {
		t.Errorf("inside: %q (want uid 1234, gid 2345, and a 64 MiB write that fails)", res.Stdout)
	}
	if err := sess.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.cs.NetworkingV1().NetworkPolicies(h.Namespace).Get(ctx, h.Pod, metav1.GetOptions{}); err == nil {
		t.Errorf("Close left the network policy")
	}
}

// TestRefusals: what a Pod cannot do is refused by name, before anything
// is created.
func TestRefusals(t *testing.T) {
	c := testClient(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	for name, spec := range map[string]sandbox.Spec{
		"a host workspace":      {Workspace: dir, AllowWeaker: true},
		"a host mount":          {Mounts: []sandbox.Mount{{Source: dir, Target: "/mnt/x"}}, AllowWeaker: true},
		"root":                  {User: "0", AllowWeaker: true},
		"the egress allow-list": {Policy: sandbox.Policy{Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkAllowList, Allow: []string{"example.com"}}}},
	} {
		sess, err := c.Create(ctx, spec)
		if err == nil {
			sess.Close(ctx)
			t.Errorf("%s: created", name)
			continue
		}
		if !strings.Contains(err.Error(), "kube") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// A command the OOM killer ends is reported as such (OOMKilled, the
// memory violation); one that ends by a SIGKILL of its own, after an OOM
// kill in the same session, or by its timeout, is not.
func TestOOMKilledCommandIsToldFromOtherKills(t *testing.T) {
	c := testClient(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sess, err := c.Create(ctx, sandbox.Spec{AllowWeaker: true, Policy: sandbox.Policy{Resources: sandbox.Resources{MemoryBytes: 64 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close(context.Background())
	for _, tc := range []struct {
		name    string
		cmd     string
		timeout time.Duration
		oom     bool
	}{
		{name: "a shell that doubles a string past the memory limit", cmd: "x=0123456789abcdef; while :; do x=$x$x; done", oom: true},
		{name: "a command that kills itself with SIGKILL, after an OOM kill", cmd: "kill -KILL $$"},
		{name: "a command killed at its timeout", cmd: "sleep 60", timeout: time.Second},
		{name: "the memory bomb again: the count is per command", cmd: "x=0123456789abcdef; while :; do x=$x$x; done", oom: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := sandbox.Exec(ctx, sess, sandbox.ExecRequest{Cmd: []string{"sh", "-c", tc.cmd}, Timeout: tc.timeout})
			if err != nil {
				t.Fatal(err)
			}
			if r.ExitCode != 137 || r.OOMKilled != tc.oom {
				t.Fatalf("exit %d %s, OOMKilled=%t; want 137 and OOMKilled=%t (stderr %q, violations %q)", r.ExitCode, r.Signal, r.OOMKilled, tc.oom, r.Stderr, r.Violations)
			}
			hasViolation := slices.ContainsFunc(r.Violations, func(v string) bool { return strings.Contains(v, "memory limit of 64.0 MiB reached") })
			if hasViolation != tc.oom {
				t.Errorf("violations %q, want the memory limit's: %t", r.Violations, tc.oom)
			}
			if r.TimedOut != (tc.timeout > 0) {
				t.Errorf("TimedOut=%t", r.TimedOut)
			}
		})
	}
	// The records of ended commands are gone: left behind, they filled
	// the pid volume (1 MiB, a page each) at a session's 257th command.
	t.Run("no ended command leaves its record on the pid volume", func(t *testing.T) {
		for _, cmd := range []string{"true", "exit 3"} {
			if _, err := sandbox.Exec(ctx, sess, sandbox.ExecRequest{Cmd: []string{"sh", "-c", cmd}}); err != nil {
				t.Fatal(err)
			}
		}
		r, err := sandbox.Exec(ctx, sess, sandbox.ExecRequest{Cmd: []string{"ls", pidDir}})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(strings.Fields(string(r.Stdout))); n != 1 {
			t.Errorf("%s holds %d records, want the ls's own:\n%s", pidDir, n, r.Stdout)
		}
	})
}
