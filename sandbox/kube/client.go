package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/egress"
)

// Name is the backend's name in State and on the command line.
const Name = "kube"

// DefaultImage is the image of a Spec that names none: the docker
// backend's base image, imported into the cluster's runtime.
const DefaultImage = "agentbox/base:latest"

// Options configure a Client.
type Options struct {
	// Kubeconfig is the kubeconfig file; empty means $KUBECONFIG, then
	// ~/.kube/config, then the in-cluster service account.
	Kubeconfig string
	// Namespace holds the sessions' Pods; empty means the kubeconfig's
	// namespace, else "default".
	Namespace string
	// RuntimeClass, when set, is every Pod's runtimeClassName (gVisor,
	// Kata): the cluster must have it.
	RuntimeClass string
	// SeccompProfile, when set, is the Pods' seccomp profile: the path,
	// relative to the kubelet's seccomp directory (<root-dir>/seccomp),
	// of agentbox's profile (sandbox/seccomp's Profile, the docker
	// backend's) that the operator installed on every node. Empty means
	// RuntimeDefault, the runtime's own, which varies: containerd 1.6's
	// allows io_uring, agentbox's refuses it with the rest of its
	// denied calls. A node without the file fails the Pod's start.
	SeccompProfile string
	// Image is the default image when a Spec names none; default
	// DefaultImage.
	Image string
	// NetworkPolicyEnforced says the operator vouches that the cluster
	// enforces NetworkPolicies (a CNI or a controller that implements
	// them), so that network-none sessions skip the proof of their
	// deny-all policy (see netproof.go): faster creates, and no need of
	// ephemeral containers or python3 in Image, at the price of trusting
	// the claim, and the enforcer's lag in applying a new policy.
	NetworkPolicyEnforced bool
	// EgressAddress is an address of this host that the cluster's Pods
	// reach without address translation; the egress proxies of sessions
	// with a network allow-list listen there (egress.go). Empty: the
	// allow-list is refused.
	EgressAddress string
	// EgressUpstream is how the egress proxies reach upstreams; the zero
	// value is the real network. For tests.
	EgressUpstream egress.Upstream
	// Snapshots stores workspace snapshots; it must also import tar
	// streams (snapshot.Store does). Nil disables Session.Snapshot and
	// seeding from a snapshot.
	Snapshots sandbox.SnapshotStore
	// Logger receives warnings (weakened policy parts, the API server's
	// warnings) and debug events. New also makes it, at debug level, the
	// destination of klog, which is client-go's and one per process: the
	// Logger of the latest Client gets it (klog.go).
	Logger *slog.Logger
}

// Client is the Kubernetes backend: each session is one Pod.
type Client struct {
	cs     kubernetes.Interface
	rest   *rest.Config
	opts   Options
	ns     string
	log    *slog.Logger
	server string
	// version is the API server's version, for Cluster.
	version string
}

// New loads the kubeconfig, connects to the API server and checks that it
// answers; one that does not is ErrUnavailable naming the server.
func New(opts Options) (*Client, error) {
	if opts.Image == "" {
		opts.Image = DefaultImage
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if opts.Kubeconfig != "" {
		rules.ExplicitPath = opts.Kubeconfig
	}
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, sandbox.Wrap("kube: load kubeconfig", sandbox.ErrUnavailable, fmt.Errorf("%s: %w", describeKubeconfig(opts.Kubeconfig), err))
	}
	ns := opts.Namespace
	if ns == "" {
		if ns, _, err = loader.Namespace(); err != nil || ns == "" {
			ns = "default"
		}
	}
	cfg.UserAgent = "agentbox"
	routeKlog(log)
	// The API server's warnings (a deprecated field, a PodSecurity
	// admission's "would violate") are this client's, and worth seeing:
	// client-go's default writes them to klog, now at debug.
	cfg.WarningHandlerWithContext = warningLogger{log}
	// Sessions open many short exec streams: keep client-side throttling
	// out of the figures (the API server has its own fairness).
	cfg.QPS, cfg.Burst = 200, 400
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, sandbox.Wrap("kube: client", sandbox.ErrInvalid, err)
	}
	c := &Client{cs: cs, rest: cfg, opts: opts, ns: ns, log: log, server: cfg.Host}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := cs.Discovery().RESTClient().Get().AbsPath("/version").Do(ctx).Raw()
	if err != nil {
		return nil, &sandbox.Error{Op: "kube: connect", Kind: sandbox.ErrUnavailable, Retryable: true,
			Err: fmt.Errorf("API server %s (%s) does not answer: %w", c.server, describeKubeconfig(opts.Kubeconfig), err)}
	}
	c.version = versionOf(v)
	if _, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil && !apierrors.IsForbidden(err) {
		if apierrors.IsNotFound(err) {
			err = fmt.Errorf("%w (create it with: kubectl create namespace %s)", err, ns)
		}
		return nil, sandbox.Wrap("kube: namespace "+ns, kindOf(err), err)
	}
	// A RuntimeClass the cluster lacks would fail every Pod's admission:
	// say so now. A client that may not read RuntimeClasses finds out at
	// the first Create.
	if rc := opts.RuntimeClass; rc != "" {
		if _, err := cs.NodeV1().RuntimeClasses().Get(ctx, rc, metav1.GetOptions{}); err != nil && !apierrors.IsForbidden(err) {
			if apierrors.IsNotFound(err) {
				err = fmt.Errorf("%w (kubectl get runtimeclass lists the cluster's; a RuntimeClass names a handler the nodes' runtime has, such as runsc for gVisor)", err)
			}
			return nil, sandbox.Wrap("kube: runtime class "+rc, kindOf(err), err)
		}
	}
	return c, nil
}

// warningLogger logs the API server's warnings at warning level.
type warningLogger struct{ log *slog.Logger }

// HandleWarningHeaderWithContext logs a warning header (code 299, as
// client-go's default handler keeps only those).
func (w warningLogger) HandleWarningHeaderWithContext(ctx context.Context, code int, _ string, text string) {
	if code == 299 && text != "" {
		w.log.WarnContext(ctx, "kube: the API server warns: "+text)
	}
}

func describeKubeconfig(path string) string {
	if path != "" {
		return "kubeconfig " + path
	}
	return "kubeconfig from $KUBECONFIG or ~/.kube/config"
}

// kindOf maps API errors to sandbox kinds.
func kindOf(err error) error {
	switch {
	case apierrors.IsNotFound(err):
		return sandbox.ErrNotFound
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err), apierrors.IsForbidden(err):
		return sandbox.ErrInvalid
	case apierrors.IsServiceUnavailable(err), apierrors.IsTimeout(err), apierrors.IsServerTimeout(err),
		errors.Is(err, context.DeadlineExceeded):
		return sandbox.ErrUnavailable
	}
	return nil
}

// Name is "kube".
func (c *Client) Name() string { return Name }

// Namespace is where this client's sessions live.
func (c *Client) Namespace() string { return c.ns }

// Cluster describes the API server New connected to, for logs and
// agentbox backends.
func (c *Client) Cluster() string {
	return fmt.Sprintf("kubernetes %s at %s, namespace %s", c.version, c.server, c.ns)
}

// Enforces lists the parts a Pod enforces on any conforming cluster:
// filesystem isolation (the image's root, read-only, plus the emptyDir
// workspace), process isolation (the Pod's pid namespace), identity (a
// non-root uid, no capabilities, no privilege escalation, the runtime's
// default seccomp profile), memory and cpu (container limits), disk (the
// workspace is a tmpfs emptyDir of the asked size), timeouts (the command's
// session killed through exec; the session's by activeDeadlineSeconds) and
// the output cap; and network.none, as a deny-all NetworkPolicy that each
// session proves holds before Create returns (a cluster that does not
// enforce it gets the part refused then), or that the operator vouches
// for (Options.NetworkPolicyEnforced); the egress allow-list when
// Options.EgressAddress says where its proxies listen (egress.go), with
// TLS inspection. Not pids (a per-node kubelet setting), nor read-only or
// deny paths.
func (c *Client) Enforces() []sandbox.Part {
	parts := []sandbox.Part{
		sandbox.PartFilesystem, sandbox.PartProcesses, sandbox.PartIdentity,
		sandbox.PartMemory, sandbox.PartCPU, sandbox.PartDisk,
		sandbox.PartTimeout, sandbox.PartOutput, sandbox.PartNetworkNone,
	}
	if c.opts.EgressAddress != "" {
		parts = append(parts, sandbox.PartNetworkAllowList, sandbox.PartNetworkInspect)
	}
	return parts
}

// Close releases the client; sessions keep running.
func (c *Client) Close() error { return nil }

// Notes say how the parts are enforced on the cluster this client sees,
// and which are not, for agentbox backends.
func (c *Client) Notes() []string {
	notes := []string{c.Cluster()}
	if c.opts.RuntimeClass != "" {
		notes = append(notes, "runtime class "+c.opts.RuntimeClass+" (the cluster's RuntimeClass object says which runtime)")
	} else {
		notes = append(notes, "no runtime class: the node's default runtime (runc shares the node's kernel)")
	}
	if c.opts.SeccompProfile != "" {
		notes = append(notes, "seccomp: agentbox's profile, installed on the nodes as "+c.opts.SeccompProfile)
	} else {
		notes = append(notes, "seccomp: the runtime's default profile (RuntimeDefault), which may allow calls agentbox's refuses (io_uring on containerd 1.6)")
	}
	if c.opts.NetworkPolicyEnforced {
		notes = append(notes, "network.none: a deny-all NetworkPolicy, which the operator says the cluster enforces (not proved per session)")
	} else {
		notes = append(notes, fmt.Sprintf("network.none: a deny-all NetworkPolicy that each session proves before it is handed out: from an ephemeral container of %s, its Pod reaches its node's kubelet (port %d) without the policy and no longer with it; where that fails (no enforcer, no ephemeral containers, no python3 in that image) the part is refused", c.opts.Image, kubeletPort))
	}
	if c.opts.EgressAddress != "" {
		notes = append(notes, "network.allowlist: each session's egress proxy listens on "+c.opts.EgressAddress+" and serves only its Pod's address; the Pod's NetworkPolicy admits only that address and port, proved as network.none's; inspected hosts' TLS is terminated with a per-session CA the Pod trusts through a bundle on its /tmp; a session resumed in another process has no proxy and is refused")
	} else {
		notes = append(notes, "network.allowlist not enforced: no --egress-address (an address of this host the Pods reach) for the egress proxies")
	}
	notes = append(notes,
		"resources.disk: the workspace is a memory-backed emptyDir of the asked size (counted toward memory)",
		"not enforced: resources.pids (a kubelet setting per node), filesystem.read_only and filesystem.deny; a host workspace or mount is refused")
	return notes
}

// RemoteWorkspaces is true: a session's workspace is an emptyDir in its
// Pod, never a directory of this host, so the agent runner copies a
// manifest's files in through the session (WriteFile) instead of handing
// over a host directory.
func (c *Client) RemoteWorkspaces() bool { return true }
