package kube

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentbox/agentbox/sandbox"
)

// GCOptions adjust GC.
type GCOptions struct {
	// DryRun lists what would be removed and removes nothing.
	DryRun bool
}

// Reaped is one session GC removed (or would).
type Reaped struct {
	Pod, Session, Reason string
}

// GC removes, in the client's namespace, the session Pods (and their
// NetworkPolicies) that ended (a session timeout, an eviction, a crash),
// and those this host made for a process that is gone, unless detached.
// Pods of other hosts whose owner may still run are left alone.
func (c *Client) GC(ctx context.Context, opts GCOptions) ([]Reaped, error) {
	pods, err := c.cs.CoreV1().Pods(c.ns).List(ctx, metav1.ListOptions{LabelSelector: labelManagedBy + "=" + managedBy})
	if err != nil {
		return nil, sandbox.Wrap("kube: gc: list pods", kindOf(err), err)
	}
	host, _ := os.Hostname()
	host = labelValue(host)
	var reaped []Reaped
	for _, p := range pods.Items {
		why := orphaned(&p, host)
		if why == "" {
			continue
		}
		id := p.Labels[labelSession]
		if !opts.DryRun {
			if err := c.deleteObjects(ctx, c.ns, id); err != nil {
				return reaped, err
			}
		}
		reaped = append(reaped, Reaped{Pod: p.Name, Session: id, Reason: why})
	}
	return reaped, nil
}

// orphaned says why GC removes p, or "" to keep it.
func orphaned(p *corev1.Pod, host string) string {
	switch p.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed:
		return "ended: " + describePod(p)
	}
	if p.Labels[labelDetached] == "true" || p.Labels[labelHost] != host {
		return ""
	}
	pid, err := strconv.Atoi(p.Labels[labelPid])
	if err != nil || pid <= 0 {
		return ""
	}
	if err := syscall.Kill(pid, 0); err == syscall.ESRCH {
		return fmt.Sprintf("its owner, process %d of this host, is gone", pid)
	}
	return ""
}
