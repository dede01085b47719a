//go:build kube

package kube

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
)

// BenchmarkAgainstKubectl measures, interleaved round by round, a session's
// create (to a running Pod) and an exec of true through this backend,
// against kubectl run (to Ready) and kubectl exec of the same image on the
// same node, and reports the medians and their ratios (a round is one
// iteration):
//
//	go test -tags kube -run - -bench AgainstKubectl -benchtime 10x ./sandbox/kube
//
// kubectl is $KUBECTL, else kube-up.sh's.
func BenchmarkAgainstKubectl(b *testing.B) {
	t := b
	rounds := b.N
	kubectl := os.Getenv("KUBECTL")
	if kubectl == "" {
		kubectl = "/var/cache/agentbox-kube/bin/kubectl"
	}
	if _, err := os.Stat(kubectl); err != nil {
		testenv.Skipf(t, "no kubectl: %v", err)
	}
	c := testClient(t, Options{})
	b.ResetTimer()
	k := func(args ...string) error {
		args = append([]string{"--kubeconfig", kubeconfig(), "-n", testNamespace}, args...)
		out, err := exec.Command(kubectl, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("kubectl %v: %w: %s", args, err, out)
		}
		return nil
	}
	const execs = 5
	var create, execT, kCreate, kExec []time.Duration
	for i := 0; i < rounds; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		t0 := time.Now()
		sess, err := c.Create(ctx, sandbox.Spec{AllowWeaker: true})
		if err != nil {
			t.Fatal(err)
		}
		create = append(create, time.Since(t0))
		for j := 0; j < execs; j++ {
			t1 := time.Now()
			if _, err := sandbox.Exec(ctx, sess, sandbox.ExecRequest{Cmd: []string{"true"}}); err != nil {
				t.Fatal(err)
			}
			execT = append(execT, time.Since(t1))
		}
		if err := sess.Close(ctx); err != nil {
			t.Fatal(err)
		}

		name := fmt.Sprintf("bench-kubectl-%d-%d", os.Getpid(), i)
		t2 := time.Now()
		if err := k("run", name, "--image", DefaultImage, "--image-pull-policy", "IfNotPresent", "--restart", "Never", "--command", "--", "sleep", "3600"); err != nil {
			t.Fatal(err)
		}
		if err := k("wait", "--for=condition=Ready", "pod/"+name, "--timeout=120s"); err != nil {
			t.Fatal(err)
		}
		kCreate = append(kCreate, time.Since(t2))
		for j := 0; j < execs; j++ {
			t3 := time.Now()
			if err := k("exec", name, "--", "true"); err != nil {
				t.Fatal(err)
			}
			kExec = append(kExec, time.Since(t3))
		}
		if err := k("delete", "pod", name, "--grace-period=0", "--force", "--wait=false"); err != nil {
			t.Fatal(err)
		}
		cancel()
	}
	med := func(d []time.Duration) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[len(s)/2]
	}
	ratio := func(a, b []time.Duration) float64 { return float64(med(a)) / float64(med(b)) }
	b.ReportMetric(float64(med(create).Milliseconds()), "create-ms")
	b.ReportMetric(float64(med(kCreate).Milliseconds()), "kubectl-run-ms")
	b.ReportMetric(float64(med(execT).Microseconds())/1000, "exec-ms")
	b.ReportMetric(float64(med(kExec).Microseconds())/1000, "kubectl-exec-ms")
	t.Logf("rounds %d, %d execs each", rounds, execs)
	t.Logf("create to running: agentbox %v, kubectl run + wait %v (ratio %.2f)", med(create).Round(time.Millisecond), med(kCreate).Round(time.Millisecond), ratio(create, kCreate))
	t.Logf("exec true:         agentbox %v, kubectl exec %v (ratio %.2f)", med(execT).Round(time.Millisecond), med(kExec).Round(time.Millisecond), ratio(execT, kExec))
}

// BenchmarkCreateNetworkNone measures, interleaved round by round, the
// create of a network-none session that proves its deny-all policy,
// against one whose policy the operator vouches for (no proof) and one
// with the Pod network open (no policy), and reports the medians:
//
//	go test -tags kube -run - -bench CreateNetworkNone -benchtime 5x ./sandbox/kube
func BenchmarkCreateNetworkNone(b *testing.B) {
	proved := testClient(b, Options{})
	trusted := testClient(b, Options{NetworkPolicyEnforced: true})
	open := sandbox.Policy{Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkHost}}
	var tProved, tTrusted, tOpen []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, r := range []struct {
			c   *Client
			pol sandbox.Policy
			d   *[]time.Duration
		}{{proved, sandbox.Policy{}, &tProved}, {trusted, sandbox.Policy{}, &tTrusted}, {proved, open, &tOpen}} {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			t0 := time.Now()
			sess, err := r.c.Create(ctx, sandbox.Spec{Policy: r.pol})
			if err != nil {
				b.Fatal(err)
			}
			*r.d = append(*r.d, time.Since(t0))
			sess.Close(ctx)
			cancel()
		}
	}
	med := func(d []time.Duration) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[len(s)/2]
	}
	b.ReportMetric(float64(med(tProved).Milliseconds()), "proved-ms")
	b.ReportMetric(float64(med(tTrusted).Milliseconds()), "trusted-ms")
	b.ReportMetric(float64(med(tOpen).Milliseconds()), "open-ms")
	b.Logf("create, network none proved %v, vouched for %v, pod network open %v",
		med(tProved).Round(time.Millisecond), med(tTrusted).Round(time.Millisecond), med(tOpen).Round(time.Millisecond))
}
