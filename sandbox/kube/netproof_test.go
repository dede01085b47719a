//go:build kube

package kube

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
)

// connectScript tries a TCP connect to each host:port argument and prints
// one outcome per line: open (connected or reset: the path is open),
// silent (no answer in 2s) or rejected.
const connectScript = `import socket, sys
for a in sys.argv[1:]:
    h, p = a.rsplit(":", 1)
    s = socket.socket()
    s.settimeout(2)
    try:
        s.connect((h, int(p))); r = "open"
    except ConnectionRefusedError:
        r = "open"
    except socket.timeout:
        r = "silent"
    except OSError as e:
        r = "rejected"
    s.close()
    print(a, r)
`

// connects runs connectScript in sess and returns each target's outcome.
func connects(t *testing.T, ctx context.Context, sess sandbox.Session, targets ...string) map[string]string {
	t.Helper()
	res, err := sandbox.Exec(ctx, sess, sandbox.ExecRequest{Cmd: append([]string{"python3", "-c", connectScript}, targets...)})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("connect from %s: %v %+v %s", sess.ID(), err, res.ExitStatus, res.Stderr)
	}
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
		if a, r, ok := strings.Cut(line, " "); ok {
			out[a] = r
		}
	}
	return out
}

// podIP is the address of sess's Pod.
func podIP(t *testing.T, ctx context.Context, c *Client, sess sandbox.Session) string {
	t.Helper()
	p, err := c.cs.CoreV1().Pods(c.ns).Get(ctx, podName(sess.ID()), metav1.GetOptions{})
	if err != nil || p.Status.PodIP == "" {
		t.Fatalf("pod of %s: %v (ip %q)", sess.ID(), err, p.Status.PodIP)
	}
	return p.Status.PodIP
}

// apiServer is the address Pods reach the API server at: the endpoint of
// the kubernetes Service (the test cluster has no kube-proxy for its
// ClusterIP).
func apiServer(t *testing.T, ctx context.Context, c *Client) string {
	t.Helper()
	l, err := c.cs.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=kubernetes"})
	if err != nil || len(l.Items) == 0 || len(l.Items[0].Endpoints) == 0 || len(l.Items[0].Endpoints[0].Addresses) == 0 ||
		len(l.Items[0].Ports) == 0 || l.Items[0].Ports[0].Port == nil {
		t.Fatalf("endpoints of the kubernetes service: %v %+v", err, l)
	}
	es := l.Items[0]
	return net.JoinHostPort(es.Endpoints[0].Addresses[0], strconv.Itoa(int(*es.Ports[0].Port)))
}

// TestNetworkNoneIsProvedAndHolds: a network-none session is created
// without AllowWeaker (its deny-all policy proved), and then reaches
// neither the API server nor another Pod, nor does that Pod reach it;
// a session with the Pod network open reaches both, so silence means the
// policy.
func TestNetworkNoneIsProvedAndHolds(t *testing.T) {
	c := testClient(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	peer, err := c.Create(ctx, sandbox.Spec{Policy: sandbox.Policy{Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkHost}}})
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close(context.Background())
	srv, err := peer.Start(ctx, sandbox.ExecRequest{Cmd: []string{"python3", "-m", "http.server", "8080"}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Kill(context.Background())
	api := apiServer(t, ctx, c)
	peerAddr := net.JoinHostPort(podIP(t, ctx, c, peer), "8080")

	t0 := time.Now()
	none, err := c.Create(ctx, sandbox.Spec{})
	if err != nil {
		t.Fatalf("a network-none session on a cluster that enforces NetworkPolicies: %v", err)
	}
	t.Logf("network-none create, proof included: %v", time.Since(t0).Round(time.Millisecond))
	defer none.Close(context.Background())
	noneAddr := net.JoinHostPort(podIP(t, ctx, c, none), "8080")

	// The peer's server listens by now (the first connect may race it,
	// which still says "open": a reset is an answer).
	if got := connects(t, ctx, peer, api, peerAddr); got[api] != "open" || got[peerAddr] != "open" {
		t.Fatalf("from a Pod without a policy: %v (want both open)", got)
	}
	got := connects(t, ctx, none, api, peerAddr)
	for _, a := range []string{api, peerAddr} {
		if got[a] == "open" || got[a] == "" {
			t.Errorf("network-none session reaches %s: %q", a, got[a])
		}
	}
	if got := connects(t, ctx, peer, noneAddr); got[noneAddr] == "open" {
		t.Errorf("another Pod reaches the network-none session at %s", noneAddr)
	}
}

// netpolPid is the pid file kube-up.sh writes for the enforcer.
const netpolPid = "/run/agentbox-kube/netpol.pid"

// TestNetworkNoneRefusedWithoutEnforcer stops the test cluster's
// NetworkPolicy enforcer (kube-up.sh's host process) for as long as two
// creates take, and starts it again: the deny-all policy then does not
// hold, and network none is refused by name, or, under AllowWeaker,
// granted with a warning.
func TestNetworkNoneRefusedWithoutEnforcer(t *testing.T) {
	c := testClient(t, Options{})
	b, err := os.ReadFile(netpolPid)
	if err != nil {
		testenv.Skipf(t, "no NetworkPolicy enforcer of kube-up.sh to stop: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s: %v", netpolPid, err)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		t.Fatalf("the enforcer (pid %d) does not run: %v", pid, err)
	}
	argv := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	stopEnforcer(t, pid)
	restarted := false
	restart := func() {
		if !restarted {
			restarted = true
			startEnforcer(t, argv)
		}
	}
	t.Cleanup(restart)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sess, err := c.Create(ctx, sandbox.Spec{})
	if err == nil {
		sess.Close(ctx)
		t.Fatal("network none granted with no enforcer in the cluster")
	}
	if !errors.Is(err, sandbox.ErrPolicyUnsupported) || !strings.Contains(err.Error(), "network.none") {
		t.Errorf("refusal %v: want ErrPolicyUnsupported naming network.none", err)
	}
	weak, err := c.Create(ctx, sandbox.Spec{AllowWeaker: true})
	if err != nil {
		t.Fatalf("allow-weaker: %v", err)
	}
	weak.Close(ctx)
	restart()
	pods, err := c.cs.CoreV1().Pods(c.ns).List(ctx, metav1.ListOptions{LabelSelector: labelPid + "=" + strconv.Itoa(os.Getpid())})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			t.Errorf("pod %s left behind", p.Name)
		}
	}
}

// stopEnforcer ends the enforcer with SIGTERM (it removes its packet
// rules on the way out) and waits until it is gone.
func stopEnforcer(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatalf("stop the enforcer (pid %d): %v", pid, err)
	}
	for i := 0; syscall.Kill(pid, 0) == nil; i++ {
		if i > 100 {
			t.Fatalf("the enforcer (pid %d) did not end", pid)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startEnforcer starts argv as kube-up.sh does (its own session, its log,
// its pid file) and waits until its rules divert packets again.
func startEnforcer(t *testing.T, argv []string) {
	t.Helper()
	log, err := os.OpenFile("/var/lib/agentbox-kube/log/netpol.log", os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Errorf("restart the enforcer: %v", err)
		return
	}
	defer log.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Errorf("restart the enforcer: %v", err)
		return
	}
	if err := os.WriteFile(netpolPid, []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
		t.Errorf("pid file of the enforcer: %v", err)
	}
	cmd.Process.Release()
	for i := 0; exec.Command("iptables", "-w", "-t", "mangle", "-C", "POSTROUTING", "-j", "AGENTBOX-NETPOL").Run() != nil; i++ {
		if i > 300 {
			t.Errorf("the restarted enforcer diverts no packets after 30s")
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestNetworkNoneWithoutAProbeIsRefused: a client whose probe image
// cannot run the probe (the pause image: no shell, no python3) has network
// none refused, naming why; under AllowWeaker the session runs with its
// deny-all policy written all the same.
func TestNetworkNoneWithoutAProbeIsRefused(t *testing.T) {
	c := testClient(t, Options{Image: "registry.k8s.io/pause:3.10"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	spec := sandbox.Spec{Image: "docker.io/" + DefaultImage}
	sess, err := c.Create(ctx, spec)
	if err == nil {
		sess.Close(ctx)
		t.Fatal("network none granted without a proof")
	}
	if !errors.Is(err, sandbox.ErrPolicyUnsupported) || !strings.Contains(err.Error(), "network.none") || !strings.Contains(err.Error(), "probe container") {
		t.Errorf("refusal %v: want ErrPolicyUnsupported naming network.none and the probe container", err)
	}
	spec.AllowWeaker = true
	sess, err = c.Create(ctx, spec)
	if err != nil {
		t.Fatalf("allow-weaker: %v", err)
	}
	defer sess.Close(ctx)
	if _, err := c.cs.NetworkingV1().NetworkPolicies(c.ns).Get(ctx, podName(sess.ID()), metav1.GetOptions{}); err != nil {
		t.Errorf("the weakened session has no deny-all policy: %v", err)
	}
}

// TestNetworkNoneProofIgnoresTheSessionImage: the probe runs from the
// operator's image, so a session whose own PATH has no python3 is still
// proved.
func TestNetworkNoneProofIgnoresTheSessionImage(t *testing.T) {
	c := testClient(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sess, err := c.Create(ctx, sandbox.Spec{Env: map[string]string{"PATH": "/nowhere"}})
	if err != nil {
		t.Fatalf("a session without python3 on its PATH: %v", err)
	}
	sess.Close(ctx)
}
