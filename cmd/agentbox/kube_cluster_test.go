//go:build kube

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/agentbox/agentbox/internal/testenv"
)

// These tests run the CLI against the test cluster that scripts/kube-up.sh
// starts (go test -tags kube ./cmd/agentbox), as a new user would: each
// command with --backend kube and the cluster's flags.

// podInit is what a session Pod's pid 1 runs (sandbox/kube's init).
const podInit = "while :; do sleep 2147483647; done"

// kubeCluster is the test cluster's kubeconfig, or skips (fails in CI)
// when no cluster answers.
func kubeCluster(t *testing.T) string {
	t.Helper()
	kc := os.Getenv("AGENTBOX_KUBECONFIG")
	if kc == "" {
		kc = "/var/lib/agentbox-kube/admin.kubeconfig"
	}
	r := runEnv(t, os.Environ(), "backends", "--json", "--kubeconfig", kc)
	var reports map[string]struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &reports); err != nil {
		t.Fatalf("backends --json: %v\n%s", err, r.stderr)
	}
	if e := reports["kube"].Error; e != "" {
		testenv.Skipf(t, "no cluster answers (start one with scripts/kube-up.sh): %s", e)
	}
	return kc
}

func TestKubeExecRunsTheCommandInAPod(t *testing.T) {
	kc := kubeCluster(t)
	t.Run("the command runs in a Pod as the sandbox user, its exit status kept", func(t *testing.T) {
		r := runEnv(t, os.Environ(), "exec", "--backend", "kube", "--kubeconfig", kc, "--namespace", "default", "--pids", "0", "--allow-weaker",
			"--", "sh", "-c", `tr '\0' ' ' </proc/1/cmdline; echo; id -u; exit 7`)
		if r.code != 7 || !strings.Contains(r.stdout, podInit) || !strings.Contains(r.stdout, "\n1000\n") {
			t.Fatalf("exit %d, want 7 and the Pod's init as pid 1\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("the default pids limit is refused by name", func(t *testing.T) {
		r := runEnv(t, os.Environ(), "exec", "--backend", "kube", "--kubeconfig", kc, "--", "true")
		if r.code != 125 || !strings.Contains(r.stderr, "resources.pids") {
			t.Fatalf("exit %d, want 125 naming resources.pids\nstderr: %s", r.code, r.stderr)
		}
	})
	t.Run("with --pids 0 the default policy runs, network none included", func(t *testing.T) {
		r := runEnv(t, os.Environ(), "exec", "--backend", "kube", "--kubeconfig", kc, "--pids", "0", "--", "echo", "hi")
		if r.code != 0 || r.stdout != "hi\n" {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("KUBECONFIG serves as well as --kubeconfig", func(t *testing.T) {
		r := runEnv(t, append(os.Environ(), "KUBECONFIG="+kc), "exec", "--backend", "kube", "--pids", "0", "--allow-weaker", "--", "echo", "hi")
		if r.code != 0 || r.stdout != "hi\n" {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
	})
}

// Each cluster flag that names something the cluster lacks fails before
// anything is created, naming it and the way to fix it.
func TestKubeFlagsNamingWhatTheClusterLacksFailSayingHowToFix(t *testing.T) {
	kc := kubeCluster(t)
	for _, tc := range []struct {
		name string
		flag []string
		want []string
	}{
		{"a namespace that is not there", []string{"--namespace", "agentbox-no-such-ns"},
			[]string{"namespace agentbox-no-such-ns", "not found", "kubectl create namespace agentbox-no-such-ns"}},
		{"a runtime class the cluster lacks", []string{"--runtime-class", "agentbox-no-such-class"},
			[]string{"runtime class agentbox-no-such-class", "not found", "kubectl get runtimeclass"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append([]string{"exec", "--backend", "kube", "--kubeconfig", kc}, tc.flag...), "--pids", "0", "--allow-weaker", "--", "true")
			r := runEnv(t, os.Environ(), args...)
			if r.code != 125 {
				t.Fatalf("exit %d, want 125\nstderr: %s", r.code, r.stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
				}
			}
			if n := strings.Count(strings.TrimSpace(r.stderr), "\n"); n > 0 {
				t.Errorf("more than one line:\n%s", r.stderr)
			}
		})
	}
}

func TestKubeBackendsShowsTheClusterItSees(t *testing.T) {
	kc := kubeCluster(t)
	r := runEnv(t, os.Environ(), "backends", "--json", "--kubeconfig", kc, "--namespace", "default")
	var reports map[string]struct {
		Enforces []string `json:"enforces"`
		Notes    []string `json:"notes"`
		Error    string   `json:"error"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &reports); err != nil {
		t.Fatalf("backends --json: %v\n%s", err, r.stdout)
	}
	k := reports["kube"]
	for _, p := range []string{"filesystem.isolation", "identity", "resources.memory", "resources.cpu", "resources.disk"} {
		if !slices.Contains(k.Enforces, p) {
			t.Errorf("kube enforces %v, lacks %s", k.Enforces, p)
		}
	}
	if slices.Contains(k.Enforces, "resources.pids") {
		t.Errorf("kube claims resources.pids: %v", k.Enforces)
	}
	notes := strings.Join(k.Notes, "\n")
	for _, w := range []string{"kubernetes v", "namespace default", "seccomp:", "not enforced: resources.pids"} {
		if !strings.Contains(notes, w) {
			t.Errorf("notes lack %q:\n%s", w, notes)
		}
	}
	table := runEnv(t, os.Environ(), "backends", "--kubeconfig", kc)
	if !strings.Contains(table.stdout, "\nkube:\n  kubernetes v") {
		t.Errorf("the table does not describe the cluster:\n%s", table.stdout)
	}
}

// A scripted agent run in a Pod: the manifest's files copied in, the
// agent's commands run there, its outputs checked and promoted here.
func TestKubeRunPromotesAScriptedAgentsOutputsFromAPod(t *testing.T) {
	kc := kubeCluster(t)
	dir := agentDir(t, "3 rows", true)
	r := runEnv(t, os.Environ(), "run", "--backend", "kube", "--kubeconfig", kc, "--namespace", "default",
		"--agent", filepath.Join(dir, "agent.yaml"), "--trace", filepath.Join(dir, "trace.jsonl"), "count the rows")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "rows: 3" {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	for _, w := range []string{"session  created kube/", "turn 1  exec_command  wc -l < data/in.csv  exit 0", "turn 2  apply_patch  output/report.md  ok", "promoted 1 file(s)"} {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "promoted", "output", "report.md"))
	if err != nil || string(b) != "# Report\n3 rows\n" {
		t.Errorf("promoted report %q, %v", b, err)
	}
}

func TestKubeServeRunsTenantsSessionsAsPods(t *testing.T) {
	kc := kubeCluster(t)
	e := startServe(t, t.TempDir(), t.TempDir(), "--backend", "kube", "--kubeconfig", kc, "--namespace", "default")
	tok := e.token("acme")
	stdout, stderr, code := e.cli(tok, "exec", "--backend", "remote", "--allow-weaker", "--", "sh", "-c", `tr '\0' ' ' </proc/1/cmdline`)
	if code != 0 || !strings.Contains(stdout, podInit) {
		t.Fatalf("exit %d, want the Pod's init as pid 1\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	_, stderr, code = e.cli(tok, "exec", "--backend", "remote", "--", "true")
	if code != 125 || !strings.Contains(stderr, "resources.pids") {
		t.Fatalf("the default pids limit: exit %d, want 125 naming resources.pids\nstderr: %s", code, stderr)
	}
}

// A session made with session create is reached again by the commands
// that name it (exec --session, session ls, session rm) on the cluster it
// was made on, without its flags and from another directory: the CLI's
// registry keeps the kubeconfig's absolute path.
func TestKubeSessionIsReachedAgainOnItsCluster(t *testing.T) {
	kc := kubeCluster(t)
	dir := t.TempDir()
	b, err := os.ReadFile(kc)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "my.kubeconfig"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "AGENTBOX_HOME="+t.TempDir(), "KUBECONFIG=")
	create := exec.Command(agentboxBinary(t), "session", "create", "--backend", "kube", "--kubeconfig", "my.kubeconfig", "--namespace", "default", "--pids", "0")
	create.Dir, create.Env = dir, env
	out, err := create.Output()
	id := strings.TrimSpace(string(out))
	if err != nil || id == "" {
		t.Fatalf("session create: %q, %v", out, err)
	}
	rm := func() cliResult { return runEnv(t, env, "session", "rm", id) }
	defer rm()
	if r := runEnv(t, env, "exec", "--session", id, "--", "sh", "-c", `tr '\0' ' ' </proc/1/cmdline`); r.code != 0 || !strings.Contains(r.stdout, podInit) {
		t.Fatalf("exec --session: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if r := runEnv(t, env, "session", "ls"); !regexp.MustCompile(id + `\s+kube\s+running`).MatchString(r.stdout) {
		t.Errorf("session ls does not say the session runs:\n%s%s", r.stdout, r.stderr)
	}
	if r := rm(); r.code != 0 {
		t.Fatalf("session rm: exit %d: %s", r.code, r.stderr)
	}
	if r := runEnv(t, env, "session", "ls"); strings.Contains(r.stdout, id) {
		t.Errorf("session rm left the session listed:\n%s", r.stdout)
	}
}

// gc reaps the Pod of a killed exec in the namespace of the cluster its
// --kubeconfig and --namespace name, and only there.
func TestKubeGCReapsTheNamedNamespace(t *testing.T) {
	kc := kubeCluster(t)
	const ns = "agentbox-gc-test"
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// Admission wants the namespace's default service account, which the
	// controller manager makes a moment later.
	for i := 0; ; i++ {
		if _, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{}); err == nil {
			break
		} else if i == 300 {
			t.Fatalf("namespace %s has no default service account: %v", ns, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	cmd := exec.Command(agentboxBinary(t), "exec", "--backend", "kube", "--kubeconfig", kc, "--namespace", ns, "--pids", "0", "--allow-weaker",
		"--", "sh", "-c", "echo started; exec sleep 600")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "started\n" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("the exec did not start: %q\n%s", line, stderr.String())
	}
	// Killed, the exec cannot delete its Pod: the orphan gc is for.
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	owner := strconv.Itoa(cmd.Process.Pid)
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "agentbox.owner-pid=" + owner})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("the killed exec's Pod in %s: %v, %v", ns, pods, err)
	}
	pod := pods.Items[0].Name
	t.Cleanup(func() { _ = cs.CoreV1().Pods(ns).Delete(context.Background(), pod, metav1.DeleteOptions{}) })

	if r := runEnv(t, os.Environ(), "gc", "--dry-run", "--kubeconfig", kc); r.code != 0 || strings.Contains(r.stdout, pod) {
		t.Fatalf("gc in the kubeconfig's namespace: exit %d, want 0 and %s/%s not named\nstdout: %s\nstderr: %s", r.code, ns, pod, r.stdout, r.stderr)
	}
	r := runEnv(t, os.Environ(), "gc", "--kubeconfig", kc, "--namespace", ns)
	want := "kube: removed pod " + ns + "/" + pod
	if r.code != 0 || !strings.Contains(r.stdout, want) || !strings.Contains(r.stdout, "process "+owner+" of this host, is gone") {
		t.Fatalf("gc --namespace %s: exit %d, want %q\nstdout: %s\nstderr: %s", ns, r.code, want, r.stdout, r.stderr)
	}
	p, err := cs.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
	if err == nil && p.DeletionTimestamp == nil {
		t.Errorf("gc said it removed %s/%s, which is still there and not being deleted", ns, pod)
	} else if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}
