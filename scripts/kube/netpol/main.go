// Command netpol enforces NetworkPolicies in the test cluster that
// scripts/kube-up.sh starts: the controller of
// sigs.k8s.io/kube-network-policies (informers on Pods, Namespaces and
// NetworkPolicies; the first packet of each connection judged in user
// space, through an nfqueue, against the policies of the Pods at both
// ends) run as a host process with a kubeconfig instead of a DaemonSet.
//
// The controller diverts packets into its queue with nftables' queue
// expression, which this host's kernel lacks (nft_queue is not built),
// so that rule set fails to load and this command diverts them itself,
// through iptables' NFQUEUE target: in mangle POSTROUTING (forwarded and
// host-sent packets to or from the Pod network, before any masquerade)
// and in mangle INPUT (Pods to the node itself, which the controller's
// POSTROUTING hook never sees: without it a Pod under a deny-all policy
// still reaches its node's kubelet and API server). The queue has no
// bypass: while the rules stand and no one reads the queue, new
// connections of Pods are dropped. A clean exit (SIGTERM, SIGINT)
// removes the rules.
//
// It is its own module, outside agentbox's and the cluster binary's.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/kube-network-policies/pkg/networkpolicy"
)

// chain is this command's mangle chain.
const chain = "AGENTBOX-NETPOL"

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster (required)")
	node := flag.String("node", "", "name of this node (required)")
	podCIDR := flag.String("pod-cidr", "", "the Pods' addresses, as a CIDR (required)")
	queue := flag.Int("queue", 100, "number of the nfqueue")
	klog.InitFlags(nil)
	flag.Parse()
	if *kubeconfig == "" || *node == "" || *podCIDR == "" {
		fmt.Fprintln(os.Stderr, "usage: netpol -kubeconfig FILE -node NAME -pod-cidr CIDR [-queue N]")
		os.Exit(2)
	}
	if err := run(*kubeconfig, *node, *podCIDR, *queue); err != nil {
		fmt.Fprintf(os.Stderr, "netpol: %v\n", err)
		os.Exit(1)
	}
}

func run(kubeconfig, node, podCIDR string, queue int) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	factory := informers.NewSharedInformerFactory(cs, 0)
	ctrl, err := networkpolicy.NewController(cs,
		factory.Networking().V1().NetworkPolicies(),
		factory.Core().V1().Namespaces(),
		factory.Core().V1().Pods(),
		nil, nil, nil, nil,
		networkpolicy.Config{
			QueueID:  queue,
			NodeName: node,
			// NRI stays on although containerd 1.6 serves none (Pod
			// addresses come from the API): with it disabled, v0.8.0
			// dereferences its nil NRI plugin for every address that is
			// not a Pod's (the node's, say) and crashes.
			NRIdisabled: false,
			// Kernels from 6.12 on have the conntrack fix this works around.
			NetfilterBug1766Fix: false,
			NFTableName:         "agentbox-netpol",
		})
	if err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	factory.Start(ctx.Done())

	// Remove what an earlier run that was killed left, then divert once
	// the controller listens on the queue (until then the rules would
	// drop every new connection of a Pod).
	removeRules()
	done := make(chan error, 1)
	go func() { done <- ctrl.Run(ctx) }()
	if err := waitQueue(ctx, queue, done); err != nil {
		return err
	}
	if err := addRules(podCIDR, queue); err != nil {
		removeRules()
		stop()
		<-done
		return err
	}
	klog.Infof("netpol: diverting new connections of %s to nfqueue %d", podCIDR, queue)
	err = <-done
	removeRules()
	if err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	return nil
}

// waitQueue waits until a process is bound to the nfqueue (the kernel
// lists it in /proc/net/netfilter/nfnetlink_queue) or the controller
// ends.
func waitQueue(ctx context.Context, queue int, done chan error) error {
	for {
		b, _ := os.ReadFile("/proc/net/netfilter/nfnetlink_queue")
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] == strconv.Itoa(queue) {
				return nil
			}
		}
		select {
		case err := <-done:
			return fmt.Errorf("controller ended before it listened on nfqueue %d: %v", queue, err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// addRules diverts the first packet of each connection from or to the
// Pod network into the queue (see the package comment for the hooks).
func addRules(podCIDR string, queue int) error {
	q := strconv.Itoa(queue)
	for _, args := range [][]string{
		{"-N", chain},
		{"-A", chain, "-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "RETURN"},
		{"-A", chain, "-s", podCIDR, "-j", "NFQUEUE", "--queue-num", q},
		{"-A", chain, "-d", podCIDR, "-j", "NFQUEUE", "--queue-num", q},
		{"-I", "POSTROUTING", "-j", chain},
		{"-I", "INPUT", "-s", podCIDR, "-j", chain},
	} {
		if err := iptables(args...); err != nil {
			return err
		}
	}
	return nil
}

// removeRules undoes addRules; what is not there is not an error.
func removeRules() {
	for {
		if iptables("-D", "POSTROUTING", "-j", chain) != nil {
			break
		}
	}
	for {
		out, _ := exec.Command("iptables", "-w", "-t", "mangle", "-S", "INPUT").Output()
		var rule []string
		for _, line := range strings.Split(string(out), "\n") {
			if strings.HasSuffix(line, "-j "+chain) {
				rule = strings.Fields(strings.TrimPrefix(line, "-A "))
			}
		}
		if rule == nil || iptables(append([]string{"-D"}, rule...)...) != nil {
			break
		}
	}
	_ = iptables("-F", chain)
	_ = iptables("-X", chain)
}

func iptables(args ...string) error {
	out, err := exec.Command("iptables", append([]string{"-w", "-t", "mangle"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("iptables -t mangle %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
