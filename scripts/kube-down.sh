#!/usr/bin/env bash
# Stops the cluster scripts/kube-up.sh started and removes what it left:
# the Pods' containers and shims, their mounts, network and cgroups, and
# the cluster's state (etcd, certificates, kubelet and containerd data).
# The built binary and the pause image's sources stay cached in
# /var/cache/agentbox-kube. Stopping what is not running is not an error.
set -uo pipefail

STATE=/var/lib/agentbox-kube
RUN=/run/agentbox-kube

log() { echo "kube-down: $*" >&2; }
[[ $(id -u) -eq 0 ]] || {
	log "must run as root"
	exit 1
}

# stop NAME: TERM, then KILL after 10s, the process of RUN/NAME.pid.
stop() {
	local name=$1 pid
	pid=$(cat "$RUN/$name.pid" 2>/dev/null) || return 0
	rm -f "$RUN/$name.pid"
	kill -0 "$pid" 2>/dev/null || return 0
	log "stopping $name ($pid)"
	kill -TERM "$pid" 2>/dev/null
	for _ in $(seq 100); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null
}

# The kubelet first, so that it restarts nothing; then every Pod's
# containers through this cluster's containerd (and no other).
stop kubelet
if [[ -S $RUN/containerd.sock ]]; then
	ctr() { command ctr --address "$RUN/containerd.sock" -n k8s.io "$@"; }
	for t in $(ctr tasks ls -q 2>/dev/null); do
		ctr tasks kill -s SIGKILL "$t" >/dev/null 2>&1
	done
	sleep 1
	for t in $(ctr tasks ls -q 2>/dev/null); do
		ctr tasks delete -f "$t" >/dev/null 2>&1
	done
	for c in $(ctr containers ls -q 2>/dev/null); do
		ctr containers delete "$c" >/dev/null 2>&1
	done
fi
# The enforcer removes its packet rules when it exits.
for name in netpol scheduler controller-manager apiserver etcd containerd; do
	stop "$name"
done
# kube-up.sh's FORWARD rules for the Pod network.
iptables -w -S FORWARD 2>/dev/null | grep -- '--comment agentbox-kube' | sed 's/^-A //' | while read -r rule; do
	eval "iptables -w -D $rule" 2>/dev/null
done
# The runc shims of this containerd outlive it: they are the processes
# whose -address is this cluster's socket.
for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $RUN/containerd.sock" 2>/dev/null); do
	kill -KILL "$pid" 2>/dev/null
done

# Mounts under the cluster's directories, deepest first.
for m in $(awk -v s="$STATE/" -v r="$RUN/" 'index($5, s) == 1 || index($5, r) == 1 {print $5}' /proc/self/mountinfo | sort -r); do
	umount -l "$m" 2>/dev/null
done
# The Pods' network namespaces (CNI) and the bridge.
for ns in $(ip netns list 2>/dev/null | awk '/^cni-/ {print $1}'); do
	ip netns delete "$ns" 2>/dev/null
done
ip link delete abkube0 2>/dev/null
# The kubelet's cgroups (cgroupfs driver, v1 hierarchies), deepest first.
for h in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/unified/kubepods; do
	[[ -d $h ]] || continue
	find "$h" -depth -type d -exec rmdir {} + 2>/dev/null
done
# The host sysctls the kubelet changed, as kube-up.sh saved them.
if [[ -s $STATE/sysctl.saved ]]; then
	while IFS= read -r kv; do
		sysctl -q -w "$kv" >/dev/null 2>&1 || log "could not restore $kv"
	done <"$STATE/sysctl.saved"
fi
rm -rf "$STATE" "$RUN"
log "down"
