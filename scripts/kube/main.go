// Command kube is every part of the single-node Kubernetes cluster that
// scripts/kube-up.sh starts (etcd, the control plane, the kubelet) and
// kubectl, in one binary chosen by its first argument, as k3s does: the
// parts share most of their packages, so one link costs far less than five.
// It is its own module (k8s.io/kubernetes with each staging module replaced
// by its published release), outside agentbox's.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	_ "time/tzdata"

	"go.etcd.io/etcd/server/v3/embed"
	_ "k8s.io/client-go/plugin/pkg/client/auth"
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	kubectl "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: kube etcd|apiserver|controller-manager|scheduler|kubelet|kubectl [flags]")
		os.Exit(2)
	}
	name := os.Args[1]
	os.Args = append([]string{"kube-" + name}, os.Args[2:]...)
	switch name {
	case "etcd":
		os.Exit(runEtcd(os.Args[1:]))
	case "apiserver":
		os.Exit(cli.Run(apiserver.NewAPIServerCommand()))
	case "controller-manager":
		os.Exit(cli.Run(controllermanager.NewControllerManagerCommand()))
	case "scheduler":
		os.Exit(cli.Run(scheduler.NewSchedulerCommand()))
	case "kubectl":
		os.Args[0] = "kubectl"
		logs.GlogSetter(kubectl.GetLogVerbosity(os.Args)) //nolint:errcheck
		if err := cli.RunNoErrOutput(kubectl.NewDefaultKubectlCommand()); err != nil {
			kubectlutil.CheckErr(err)
		}
	case "kubelet":
		os.Exit(cli.Run(kubelet.NewKubeletCommand(context.Background())))
	default:
		fmt.Fprintf(os.Stderr, "kube: unknown part %q\n", name)
		os.Exit(2)
	}
}

// runEtcd serves a one-member etcd on 127.0.0.1:2379 with its data in the
// directory given as the only argument.
func runEtcd(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: kube etcd DATA-DIR")
		return 2
	}
	cfg := embed.NewConfig()
	cfg.Dir = args[0]
	cfg.LogLevel = "warn"
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcd: %v\n", err)
		return 1
	}
	defer e.Close()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		fmt.Fprintf(os.Stderr, "etcd: %v\n", err)
		return 1
	}
	fmt.Fprintln(os.Stderr, "etcd: ready")
	select {
	case err := <-e.Err():
		fmt.Fprintf(os.Stderr, "etcd: %v\n", err)
		return 1
	case <-sig:
		return 0
	}
}
