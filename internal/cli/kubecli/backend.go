// Package kubecli is the kube backend's part of agentbox's command line:
// the backend and its garbage collection. It links client-go, which only
// agentbox-full carries.
package kubecli

import (
	"context"
	"fmt"
	"io"

	"github.com/agentbox/agentbox/internal/cli"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/kube"
)

// Register links the kube backend and its gc into a.
func Register(a *cli.App) {
	a.AddBackend("kube", Backend, GC)
}

// Backend is the kube backend: one Pod per session in --namespace of the
// cluster --kubeconfig names (default $KUBECONFIG, then ~/.kube/config),
// with --runtime-class, --egress-address (where network allow-list
// proxies listen) and --image (default agentbox/base:latest, which the
// cluster's nodes must have).
func Backend(o cli.BackendOptions) (sandbox.Client, error) {
	return kube.New(kube.Options{
		Kubeconfig: o.Kube.Kubeconfig, Namespace: o.Kube.Namespace, RuntimeClass: o.Kube.RuntimeClass,
		EgressAddress: o.Kube.EgressAddress, Image: o.Image, Snapshots: o.Snapshots, Logger: o.Logger,
	})
}

// GC removes the Pods of sessions that ended, or whose owner on this host
// died, in the namespace (--namespace, default the kubeconfig's) of the
// cluster --kubeconfig names (default $KUBECONFIG, then ~/.kube/config).
func GC(ctx context.Context, _ *cli.App, opts cli.GCOptions, out io.Writer) error {
	dryRun := opts.DryRun
	c, err := kube.New(kube.Options{Kubeconfig: opts.Kube.Kubeconfig, Namespace: opts.Kube.Namespace})
	if err != nil {
		return err
	}
	reaped, err := c.GC(ctx, kube.GCOptions{DryRun: dryRun})
	verb := "removed"
	if dryRun {
		verb = "would remove"
	}
	for _, r := range reaped {
		fmt.Fprintf(out, "kube: %s pod %s/%s (session %s): %s\n", verb, c.Namespace(), r.Pod, r.Session, r.Reason)
	}
	if len(reaped) == 0 {
		fmt.Fprintf(out, "kube: no orphaned pods in namespace %s\n", c.Namespace())
	}
	return err
}
