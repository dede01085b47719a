package kube

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/agentbox/agentbox/sandbox"
)

// handles is the kube part of a State.
type handles struct {
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	UID       string `json:"uid,omitempty"`
	// Server is the API server the Pod lives on, so that a State is not
	// resumed against another cluster by mistake.
	Server string `json:"server,omitempty"`
}

// Create starts a session: its Pod (and, for network none, a deny-all
// NetworkPolicy that the session proves holds, see netproof.go), seeded
// from spec.Snapshot when set, and waits until the Pod runs.
func (c *Client) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Session, error) {
	const op = "kube: create"
	if spec.Workdir == "" {
		spec.Workdir = sandbox.DefaultWorkdir
	}
	if spec.Image == "" {
		spec.Image = c.opts.Image
	}
	if !path.IsAbs(spec.Workdir) || path.Clean(spec.Workdir) != spec.Workdir || spec.Workdir == "/" || spec.Workdir == "/tmp" {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "%s: workdir %q must be a clean absolute path other than / and /tmp", op, spec.Workdir)
	}
	// Exposed ports are kept in the State, but DialPort is not built for
	// Pods (it would be the pods/portforward subresource): a dial says so.
	if err := sandbox.CheckPorts(spec.Ports); err != nil {
		return nil, sandbox.Wrap(op, nil, err)
	}
	if spec.Workspace != "" {
		// A Pod may run on any node: a directory of this host cannot be
		// its workspace. Name the directory and its owner, as a refusal
		// for ownership must.
		owner := "unknown owner"
		if fi, err := os.Stat(spec.Workspace); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				owner = fmt.Sprintf("owner uid %d", st.Uid)
			}
		}
		return nil, sandbox.Errorf(sandbox.ErrPolicyUnsupported, "%s: workspace %s (%s) is a host directory; a Pod's workspace is an emptyDir: seed it from a snapshot instead", op, spec.Workspace, owner)
	}
	if len(spec.Mounts) > 0 {
		return nil, sandbox.Errorf(sandbox.ErrPolicyUnsupported, "%s: host mounts (%s first) cannot reach a Pod on another node", op, spec.Mounts[0].Source)
	}
	if _, err := sandbox.Check(Name, c.Enforces(), spec.Policy, spec.AllowWeaker, c.log); err != nil {
		return nil, err
	}
	if spec.Snapshot != "" && c.importer() == nil {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "%s: a snapshot to seed from, but the client has no snapshot store that imports and exports", op)
	}
	uid, gid, err := parseUser(spec.User)
	if err != nil {
		return nil, err
	}
	if uid == 0 {
		return nil, sandbox.Errorf(sandbox.ErrPolicyUnsupported, "%s: user 0: session Pods run as non-root (runAsNonRoot)", op)
	}
	id, err := newID()
	if err != nil {
		return nil, sandbox.Wrap(op, nil, err)
	}
	mode := spec.Policy.Network.EffectiveMode()
	var link *egressLink
	if mode == sandbox.NetworkAllowList && c.opts.EgressAddress != "" {
		// (Without an egress address, sandbox.Check has refused the
		// allow-list, or AllowWeaker runs the Pod with its network open,
		// as it did before there was an allow-list here.)
		if link, err = c.startEgress(spec); err != nil {
			return nil, err
		}
	}
	pods := c.cs.CoreV1().Pods(c.ns)
	pod, err := pods.Create(ctx, c.podFor(id, spec, uid, gid), metav1.CreateOptions{})
	if err != nil {
		link.close()
		return nil, sandbox.Wrap(op+" pod", kindOf(err), err)
	}
	s := &session{c: c, id: id, spec: spec, uid: uid, created: pod.CreationTimestamp.Time, egress: link,
		h: handles{Namespace: c.ns, Pod: pod.Name, UID: string(pod.UID), Server: c.server}}
	fail := func(err error) (sandbox.Session, error) {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = c.deleteObjects(cctx, s.h.Namespace, id)
		link.close()
		return nil, err
	}
	// Network none and the allow-list are both a policy that denies all
	// but (for the allow-list) the session's egress proxy.
	none := mode == sandbox.NetworkNone || link != nil
	part := "network.none"
	if link != nil {
		part = "network.allowlist"
	}
	if none && c.opts.NetworkPolicyEnforced {
		// The operator vouches for the cluster: the policy exists before
		// the Pod starts, and nothing is proved.
		if _, err := c.cs.NetworkingV1().NetworkPolicies(c.ns).Create(ctx, s.policy(), metav1.CreateOptions{}); err != nil {
			return fail(sandbox.Wrap(op+" network policy", kindOf(err), err))
		}
	}
	prove := none && !c.opts.NetworkPolicyEnforced
	var proberErr error
	if prove {
		// The probe's container goes in before the Pod starts, so that
		// it starts with it (see netproof.go).
		proberErr = s.addProber(ctx, pod)
		var np *errNotProved
		if proberErr != nil && !errors.As(proberErr, &np) {
			return fail(proberErr)
		}
	}
	running, err := c.waitRunning(ctx, pod)
	if err != nil {
		return fail(err)
	}
	if prove {
		// Until the proof returns, the Pod runs only its init: no command
		// of the session has run yet (see netproof.go).
		err := proberErr
		if err == nil {
			err = s.proveDenyAll(ctx, running)
		}
		var np *errNotProved
		if errors.As(err, &np) {
			if !spec.AllowWeaker {
				return fail(sandbox.Errorf(sandbox.ErrPolicyUnsupported, "%s: %s: the NetworkPolicy of pod %s is not proved: %s", op, part, pod.Name, np.why))
			}
			// The proof may have failed before it wrote the policy: the
			// weakened session still gets it.
			_, err := c.cs.NetworkingV1().NetworkPolicies(c.ns).Create(ctx, s.policy(), metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				return fail(sandbox.Wrap(op+" network policy", kindOf(err), err))
			}
			c.log.Warn("kube: "+part+" weakened (allow-weaker): the NetworkPolicy is written but not proved", "pod", pod.Name, "why", np.why)
		} else if err != nil {
			return fail(err)
		}
	}
	if link != nil {
		if err := link.serve(running.Status.PodIP); err != nil {
			return fail(sandbox.Wrap(op+" egress proxy", sandbox.ErrUnavailable, err))
		}
		if err := link.trust(ctx, s); err != nil {
			return fail(err)
		}
	}
	if spec.Snapshot != "" {
		if err := s.restore(ctx, spec.Snapshot); err != nil {
			return fail(err)
		}
		s.snapshot = spec.Snapshot
	}
	return s, nil
}

// waitRunning watches pod until its container runs; a Pod that fails,
// ends or cannot start (an image that is missing, a RuntimeClass the node
// lacks) is an error saying why.
func (c *Client) waitRunning(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	op := "kube: start pod " + pod.Name
	w, err := c.cs.CoreV1().Pods(pod.Namespace).Watch(ctx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", pod.Name).String(),
		ResourceVersion: pod.ResourceVersion,
	})
	if err != nil {
		return nil, sandbox.Wrap(op, kindOf(err), err)
	}
	defer w.Stop()
	last := pod
	for {
		if done, err := runningOrFailed(last); done {
			if err != nil {
				return nil, sandbox.Wrap(op, sandbox.ErrUnavailable, err)
			}
			return last, nil
		}
		select {
		case <-ctx.Done():
			return nil, sandbox.Wrap(op, sandbox.ErrTimeout, fmt.Errorf("%w; the pod: %s", ctx.Err(), describePod(last)))
		case ev, ok := <-w.ResultChan():
			if !ok {
				// The watch ended (a server timeout): look once and watch again.
				p, err := c.cs.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
				if err != nil {
					return nil, sandbox.Wrap(op, kindOf(err), err)
				}
				return c.waitRunning(ctx, p)
			}
			switch ev.Type {
			case watch.Deleted:
				return nil, sandbox.Errorf(sandbox.ErrGone, "%s: deleted while starting", op)
			case watch.Error:
				return nil, sandbox.Wrap(op, sandbox.ErrUnavailable, apierrors.FromObject(ev.Object))
			}
			if p, ok := ev.Object.(*corev1.Pod); ok {
				last = p
			}
		}
	}
}

// runningOrFailed says whether p's container runs (done, nil), can no
// longer run (done, why), or may still start (not done).
func runningOrFailed(p *corev1.Pod) (bool, error) {
	switch p.Status.Phase {
	case corev1.PodFailed, corev1.PodSucceeded:
		return true, fmt.Errorf("pod ended: %s", describePod(p))
	}
	for _, st := range p.Status.ContainerStatuses {
		if st.Name != container {
			continue
		}
		if st.State.Running != nil {
			return true, nil
		}
		if w := st.State.Waiting; w != nil {
			switch w.Reason {
			case "ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName",
				"CreateContainerConfigError", "CreateContainerError", "RunContainerError":
				return true, fmt.Errorf("container cannot start: %s", describePod(p))
			}
		}
		if st.State.Terminated != nil {
			return true, fmt.Errorf("container ended: %s", describePod(p))
		}
	}
	return false, nil
}

// newID is a session id: 12 hex digits, fit for a Pod name.
func newID() (string, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("session id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// Resume reattaches to the Pod st names; a Pod that is gone or no longer
// runs is ErrGone.
func (c *Client) Resume(ctx context.Context, st sandbox.State) (sandbox.Session, error) {
	op := "kube: resume " + st.String()
	h, err := c.handlesOf(st)
	if err != nil {
		return nil, err
	}
	p, err := c.cs.CoreV1().Pods(h.Namespace).Get(ctx, h.Pod, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || err == nil && (h.UID != "" && string(p.UID) != h.UID || p.DeletionTimestamp != nil) {
		return nil, sandbox.Errorf(sandbox.ErrGone, "%s: pod %s/%s is gone", op, h.Namespace, h.Pod)
	}
	if err != nil {
		return nil, sandbox.Wrap(op, kindOf(err), err)
	}
	if done, why := runningOrFailed(p); !done || why != nil {
		return nil, sandbox.Errorf(sandbox.ErrGone, "%s: pod %s/%s does not run: %s", op, h.Namespace, h.Pod, describePod(p))
	}
	spec := st.Spec
	if spec.Policy.Network.EffectiveMode() == sandbox.NetworkAllowList {
		return nil, sandbox.Errorf(sandbox.ErrUnsupported, "%s: its egress proxy lived in the process that created it; the pod reaches nothing without it: close it and create another", op)
	}
	uid, _, err := parseUser(spec.User)
	if err != nil {
		return nil, err
	}
	return &session{c: c, id: st.ID, spec: spec, uid: uid, h: h, snapshot: st.Snapshot, created: st.CreatedAt}, nil
}

// Status says whether the Pod st names runs ("running"), can no longer
// run or is gone ("gone"), or is neither yet ("unknown"), for agentbox
// session ls and gc.
func (c *Client) Status(ctx context.Context, st sandbox.State) (string, error) {
	h, err := c.handlesOf(st)
	if err != nil {
		return "", err
	}
	p, err := c.cs.CoreV1().Pods(h.Namespace).Get(ctx, h.Pod, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "gone", nil
	case err != nil:
		return "", sandbox.Wrap("kube: status of "+st.String(), kindOf(err), err)
	case h.UID != "" && string(p.UID) != h.UID || p.DeletionTimestamp != nil:
		return "gone", nil
	}
	switch done, why := runningOrFailed(p); {
	case done && why == nil:
		return "running", nil
	case done:
		return "gone", nil
	}
	return "unknown", nil
}

// Rebuild makes a new session from the latest snapshot of the one st
// describes (its emptyDir workspace went with its Pod).
func (c *Client) Rebuild(ctx context.Context, st sandbox.State) (sandbox.Session, error) {
	op := "kube: rebuild " + st.String()
	h, err := c.handlesOf(st)
	if err != nil {
		return nil, err
	}
	if p, err := c.cs.CoreV1().Pods(h.Namespace).Get(ctx, h.Pod, metav1.GetOptions{}); err == nil && p.DeletionTimestamp == nil {
		if done, why := runningOrFailed(p); done && why == nil {
			return nil, sandbox.Errorf(sandbox.ErrInvalid, "%s: pod %s/%s still runs: resume it, or delete it first", op, h.Namespace, h.Pod)
		}
	}
	if err := c.deleteObjects(ctx, h.Namespace, st.ID); err != nil {
		return nil, err
	}
	if st.Snapshot == "" {
		return nil, sandbox.Errorf(sandbox.ErrNotFound, "%s: its workspace went with its pod and it has no snapshot", op)
	}
	spec := st.Spec
	spec.Snapshot = st.Snapshot
	return c.Create(ctx, spec)
}

// Delete removes the Pod and the NetworkPolicy st names; what is gone
// already is not an error.
func (c *Client) Delete(ctx context.Context, st sandbox.State) error {
	h, err := c.handlesOf(st)
	if err != nil {
		return err
	}
	return c.deleteObjects(ctx, h.Namespace, st.ID)
}

// deleteObjects removes session id's Pod (at once: no grace period) and
// NetworkPolicy.
func (c *Client) deleteObjects(ctx context.Context, ns, id string) error {
	now := metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}
	if err := c.cs.CoreV1().Pods(ns).Delete(ctx, podName(id), now); err != nil && !apierrors.IsNotFound(err) {
		return sandbox.Wrap("kube: delete pod "+podName(id), kindOf(err), err)
	}
	if err := c.cs.NetworkingV1().NetworkPolicies(ns).Delete(ctx, podName(id), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return sandbox.Wrap("kube: delete network policy "+podName(id), kindOf(err), err)
	}
	return nil
}

// handlesOf reads st's kube part and checks it is this backend's, on this
// cluster.
func (c *Client) handlesOf(st sandbox.State) (handles, error) {
	if st.Backend != Name {
		return handles{}, sandbox.Errorf(sandbox.ErrInvalid, "kube: state %s is of the %s backend", st, st.Backend)
	}
	var h handles
	if err := sandbox.DecodeHandles(st, &h, nil); err != nil {
		return handles{}, err
	}
	if h.Pod == "" || h.Namespace == "" {
		return handles{}, sandbox.Errorf(sandbox.ErrInvalid, "kube: state %s names no pod", st)
	}
	if h.Server != "" && h.Server != c.server {
		return handles{}, sandbox.Errorf(sandbox.ErrInvalid, "kube: state %s is of the cluster at %s, not %s", st, h.Server, c.server)
	}
	return h, nil
}
