// Package kube is agentbox's Kubernetes backend: each session is one Pod
// in a namespace of an existing cluster, driven through client-go.
//
// The Pod runs the image's /bin/sh as a sleeping init; commands arrive
// through the pods/exec subresource (WebSocket, falling back to SPDY) with
// stdin, stdout and stderr or a terminal that can be resized, and their
// exit codes. Each command is started by a small wrapper that records its
// pid, so that Kill and timeouts end, with a second exec, the command's
// whole session (runc starts each exec as a session leader) and every
// descendant of it, a setsid'ed child included; a daemon that double-forks
// out of its session goes to the Pod's init and lives until the session's
// timeout (a Pod has no per-command cgroup to find it by).
//
// A command the OOM killer ends exits 137 as any SIGKILL does; the
// container's oom_kill counter, recorded at the command's start and read
// again after it, tells the two apart (oom.go).
//
// The container runs as the session's uid (runAsNonRoot), with no
// capabilities, allowPrivilegeEscalation false, a read-only root
// filesystem, a seccomp profile (the runtime's default, or agentbox's own
// when Options.SeccompProfile names where the operator installed it on the
// nodes: containerd 1.6's default allows io_uring, agentbox's does not),
// memory and cpu limits, and an optional RuntimeClass (gVisor, Kata). The workspace is an
// emptyDir at the workdir (memory-backed and bounded when the policy sets
// a disk limit), /tmp another; activeDeadlineSeconds carries the session
// timeout. Files move through exec (cat, find, tar) inside the Pod, so
// every path is resolved as the sandbox sees it; snapshots stream the
// workspace as tar into the snapshot store's Import, which treats the
// archive as untrusted.
//
// For network none the backend writes a NetworkPolicy that denies all
// ingress and egress of the Pod, and proves it holds before Create
// returns, per session (netproof.go): nothing in the API says whether a
// cluster enforces NetworkPolicies, nor when its enforcer has applied a
// new one. A probe in an ephemeral container of the Pod (the operator's
// image, Options.Image, with python3: never the session's image, which
// could fake the answer) connects to its node's kubelet before the policy
// exists, which must answer quickly, then again after it is written until
// the connect gets no answer; until then the session container has run
// only its init. Where the proof fails (no enforcer, no ephemeral
// containers, a probe image without python3) network.none is refused by
// name, or granted with a warning under AllowWeaker.
// Options.NetworkPolicyEnforced skips the proof: the operator vouches for
// the cluster. The proof costs an ephemeral container's start and a
// second of silence per create (docs/SCALE.md has the figures).
//
// The egress allow-list (egress.go) runs the session's egress proxy
// (sandbox/egress: the same host rules and credentials as the other
// backends) in this process, on Options.EgressAddress; the Pod's policy
// denies all but TCP to that address and port (proved as above), and the
// proxy serves only the Pod's address. For TLS inspection the Pod trusts
// the proxy's per-session CA through a bundle written to its /tmp. A
// session resumed in another process has no proxy: Resume refuses it.
//
// A host directory as the workspace, host mounts, read-only and deny
// paths and a pids limit are refused by name.
//
// The escape tests that apply to a Pod (the native backend's attack
// helper, internal/attacktest, run inside sessions) are in escape_test.go
// and escape_reach_test.go, with the ones that do not apply and why.
//
// Pods carry the labels app.kubernetes.io/managed-by=agentbox,
// agentbox.session, agentbox.owner-host and agentbox.owner-pid; GC removes
// the ones that ended and, on this host, the ones whose owner is gone.
package kube
