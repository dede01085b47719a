package cli

import (
	"log/slog"
	"os"

	"github.com/spf13/pflag"

	"github.com/agentbox/agentbox/internal/datadir"
	"github.com/agentbox/agentbox/internal/toolcache"
)

// sandboxFlags are the flags that shape a new sandbox: its backend, policy,
// workspace and mounts. exec and session create share them.
type sandboxFlags struct {
	exec      execFlags
	workspace workspaceFlags
	backend   string
	server    string
	kube      KubeOptions
	verbose   bool
}

// register adds the flags to fl.
func (sf *sandboxFlags) register(fl *pflag.FlagSet) {
	f, wf := &sf.exec, &sf.workspace
	fl.StringVar(&f.workspace, "workspace", "", "host `DIR` bound read-write at /workspace (default: a fresh temporary dir, removed after)")
	fl.StringArrayVar(&f.ro, "ro", nil, "bind host `HOST[:DEST]` read-only (DEST defaults to /workspace/<name>; repeatable)")
	fl.StringArrayVar(&f.rw, "rw", nil, "bind host `HOST[:DEST]` read-write (repeatable)")
	fl.StringVar(&f.network, "network", "none", "`none|HOST[,HOST...]`: no network, or only these hosts through the egress proxy (*.example.com for subdomains)")
	f.inspectionFlags(fl)
	fl.StringVar(&f.memory, "memory", "1G", "memory limit of the whole sandbox (`SIZE` like 512M; 0 for none)")
	fl.Int64Var(&f.pids, "pids", 512, "limit on processes and threads (`N`; 0 for none)")
	fl.Float64Var(&f.cpus, "cpus", 0, "CPU limit in cores (`N`, e.g. 1.5; 0 for none)")
	fl.StringVar(&f.disk, "disk", "", "workspace disk quota (`SIZE`); refused where the backend cannot enforce it")
	fl.StringArrayVar(&f.env, "env", nil, "set `KEY=VALUE` in the sandbox (repeatable; the host environment is not inherited)")
	fl.StringVar(&f.user, "user", "", "run as `UID[:GID]` inside the sandbox (default 1000:1000)")
	fl.BoolVar(&f.allowWeaker, "allow-weaker", false, "run even if the backend cannot enforce parts of the policy (each is logged)")
	fl.StringVar(&f.image, "image", "", "root filesystem image (docker backend)")
	fl.StringSliceVar(&f.caches, "cache", nil, toolcache.FlagUsage())
	fl.StringVar(&sf.backend, "backend", "linux", "sandbox backend: linux (native isolation), docker, kube (a Pod on a Kubernetes cluster; see --kubeconfig), remote (an agentbox serve; see --server), or local (confines NOTHING; development only)")
	fl.StringVar(&sf.server, "server", "", "the agentbox serve `ADDR` of --backend remote: http(s)://HOST:PORT or unix:PATH (default $AGENTBOX_SERVER; the API key is $AGENTBOX_TOKEN)")
	RegisterKubeFlags(fl, &sf.kube)
	fl.BoolVarP(&sf.verbose, "verbose", "v", false, "log what the backend does")
	fl.StringVar(&wf.manifest, "manifest", "", "workspace manifest (`FILE`, YAML or JSON) materialized before the command runs")
	fl.StringVar(&wf.snapshot, "snapshot", "", "seed the workspace from snapshot `ID` (agentbox snapshot ls)")
	fl.BoolVar(&wf.saveSnapshot, "save-snapshot", false, "save the workspace as a snapshot at the end and print its ID on stderr")
	fl.StringVar(&wf.store, "store", datadir.Snapshots(), "snapshot store `DIR`")
}

// RegisterKubeFlags adds the kube backend's flags to fl: where its Pods
// are (RegisterKubeClusterFlags) and how new ones are made.
func RegisterKubeFlags(fl *pflag.FlagSet, k *KubeOptions) {
	RegisterKubeClusterFlags(fl, k)
	fl.StringVar(&k.RuntimeClass, "runtime-class", "", "RuntimeClass of --backend kube's Pods (`NAME`, e.g. gvisor or kata; default the node's runtime)")
	fl.StringVar(&k.EgressAddress, "egress-address", "", "`IP` of this host that --backend kube's Pods reach untranslated: a session's egress proxy (--network with hosts) listens there (default none: the allow-list is refused)")
}

// RegisterKubeClusterFlags adds the flags that say where the kube
// backend's Pods are, --kubeconfig and --namespace, to fl: all that a
// command which makes no Pod (gc) needs.
func RegisterKubeClusterFlags(fl *pflag.FlagSet, k *KubeOptions) {
	fl.StringVar(&k.Kubeconfig, "kubeconfig", "", "kubeconfig `FILE` of --backend kube (default $KUBECONFIG, then ~/.kube/config)")
	fl.StringVar(&k.Namespace, "namespace", "", "namespace of --backend kube's Pods (`NAME`; default the kubeconfig's)")
}

// shaping are the names of the flags that shape a new sandbox.
var shaping = []string{"workspace", "ro", "rw", "network", "inspect", "rule", "credential", "memory", "pids", "cpus", "disk", "env", "user",
	"allow-weaker", "image", "cache", "backend", "server", "kubeconfig", "namespace", "runtime-class", "egress-address", "manifest", "snapshot", "save-snapshot", "store"}

// localOnly are the shaping flags that name this host's files, which a
// remote backend's server cannot read.
var localOnly = []string{"manifest", "snapshot", "save-snapshot", "store", "cache"}

// checkRemote refuses, for --backend remote, the flags that name this
// host's manifest or snapshot store: the session runs on the server.
func (sf *sandboxFlags) checkRemote(fl *pflag.FlagSet) error {
	if sf.backend != "remote" {
		return nil
	}
	if fl.Changed("credential") {
		return Failf("--credential: a remote session's egress proxy runs on the server, and secrets stay with the process that runs the proxy; the server's operator gives credentials in its config (tenants' credentials)")
	}
	for _, n := range localOnly {
		if fl.Changed(n) {
			return Failf("--%s names this host's files, and --backend remote runs the session on the server; use the server's API for its snapshots (a workspace or mount must lie under the tenant's host base on the server)", n)
		}
	}
	return nil
}

// changed lists the shaping flags given on the command line.
func (sf *sandboxFlags) changed(fl *pflag.FlagSet) []string {
	var set []string
	for _, n := range shaping {
		if fl.Changed(n) {
			set = append(set, n)
		}
	}
	return set
}

// backendOptions are the options the backend is opened with.
func (sf *sandboxFlags) backendOptions(pw *preparedWorkspace) BackendOptions {
	bo := stderrBackendOptions(sf.verbose, sf.exec.image, sf.server)
	bo.Kube = sf.kube
	if pw.store != nil {
		bo.Snapshots = pw.store
	}
	return bo
}

// stderrBackendOptions log the backend's warnings (everything, verbose)
// on stderr.
func stderrBackendOptions(verbose bool, image, server string) BackendOptions {
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelDebug
	}
	return BackendOptions{
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})),
		Image:  image, Warn: os.Stderr, Server: server,
	}
}
