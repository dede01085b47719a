#!/usr/bin/env bash
# Starts a single-node Kubernetes cluster on this host for the kube backend's
# tests and benchmarks, from parts the Go module proxy and Debian serve:
# etcd, the control plane, the kubelet and kubectl linked into one binary
# (scripts/kube, built once and cached), containerd and runc, the CNI
# bridge plugin, and a NetworkPolicy enforcer (scripts/kube/netpol:
# sigs.k8s.io/kube-network-policies as a host process, its own cached
# binary). It waits for the node to be Ready and for the default
# service account, then prints the admin kubeconfig's path.
#
# Idempotent: a part already running is left alone, a binary already built
# for the same sources is reused. scripts/kube-down.sh stops everything.
#
# Layout:
#   /var/cache/agentbox-kube   the built binary, the pause image (kept across runs)
#   /var/lib/agentbox-kube     certificates, kubeconfigs, etcd, kubelet and
#                              containerd data, logs (removed by kube-down)
#   /run/agentbox-kube         sockets and pid files
#
# Environment: KUBE_NODE (node name, default agentbox-node), KUBE_IMAGES
# (Docker images to import into the cluster, default agentbox/base:latest;
# "none" imports none).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

CACHE=/var/cache/agentbox-kube
STATE=/var/lib/agentbox-kube
RUN=/run/agentbox-kube
NODE=${KUBE_NODE:-agentbox-node}
IMAGES=${KUBE_IMAGES:-agentbox/base:latest}
PAUSE_IMAGE=registry.k8s.io/pause:3.10
SERVICE_CIDR=10.96.0.0/16
POD_CIDR=10.244.0.0/16
kube=$CACHE/bin/kube

log() { echo "kube-up: $*" >&2; }
die() {
	echo "kube-up: $*" >&2
	exit 1
}

[[ $(id -u) -eq 0 ]] || die "must run as root (it starts containerd and a kubelet)"

# --- packages -----------------------------------------------------------
declare -A need=(
	[containerd]=containerd [runc]=runc [containernetworking-plugins]=/usr/lib/cni/bridge
	[openssl]=openssl [iptables]=iptables [curl]=curl [iproute2]=ip
)
missing=()
for pkg in "${!need[@]}"; do
	command -v "${need[$pkg]}" >/dev/null 2>&1 || missing+=("$pkg")
done
if ((${#missing[@]})); then
	log "installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# --- build ----------------------------------------------------------------
# The stamp names the sources and the Go version the binary was built from.
src=$repo/scripts/kube
stamp=$( (
	go version
	cat "$src/go.mod" "$src/go.sum" "$src"/*.go "$src"/pause/*.go
) | sha256sum | cut -d' ' -f1)
mkdir -p "$CACHE/bin"
if [[ ! -x $kube || $(cat "$CACHE/bin/stamp" 2>/dev/null) != "$stamp" ]]; then
	version=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v1\./ {print $2; exit}' "$src/go.mod")
	[[ -n $version ]] || die "scripts/kube/go.mod names no k8s.io/kubernetes version"
	minor=$(echo "$version" | cut -d. -f2)
	log "building the cluster binary (Kubernetes $version; a cold build takes a while)"
	start=$(date +%s)
	ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$version"
	ldflags+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
	ldflags+=" -X k8s.io/client-go/pkg/version.gitVersion=$version"
	(cd "$src" && nice -n 10 go build -trimpath -ldflags "$ldflags" -o "$kube.new" .) ||
		die "build of scripts/kube failed"
	(cd "$src" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$CACHE/bin/pause" ./pause) ||
		die "build of scripts/kube/pause failed"
	mv "$kube.new" "$kube"
	echo "$stamp" >"$CACHE/bin/stamp"
	log "built in $(($(date +%s) - start))s"
fi
# The NetworkPolicy enforcer (scripts/kube/netpol, kube-network-policies'
# controller) is a module and a binary of its own, with its own stamp, so
# that changing it does not rebuild the cluster binary.
netpol=$CACHE/bin/netpol
nsrc=$repo/scripts/kube/netpol
nstamp=$( (
	go version
	cat "$nsrc/go.mod" "$nsrc/go.sum" "$nsrc"/*.go
) | sha256sum | cut -d' ' -f1)
if [[ ! -x $netpol || $(cat "$CACHE/bin/netpol.stamp" 2>/dev/null) != "$nstamp" ]]; then
	log "building the NetworkPolicy enforcer"
	(cd "$nsrc" && nice -n 10 go build -trimpath -ldflags "-s -w" -o "$netpol.new" .) ||
		die "build of scripts/kube/netpol failed"
	mv "$netpol.new" "$netpol"
	echo "$nstamp" >"$CACHE/bin/netpol.stamp"
fi
printf '#!/bin/sh\nexec %s kubectl "$@"\n' "$kube" >"$CACHE/bin/kubectl"
chmod 755 "$CACHE/bin/kubectl"

# --- certificates -----------------------------------------------------------
mkdir -p "$STATE/pki" "$STATE/log" "$RUN"
pki=$STATE/pki
host_ip=$(ip -4 route get 1.1.1.1 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p')
[[ -n $host_ip ]] || host_ip=127.0.0.1

# cert NAME SUBJECT [SAN]: a key and a certificate signed by the cluster CA.
cert() {
	local name=$1 subj=$2 san=${3:-}
	[[ -s $pki/$name.crt ]] && return
	openssl genrsa -out "$pki/$name.key" 2048 2>/dev/null
	openssl req -new -key "$pki/$name.key" -subj "$subj" -out "$pki/$name.csr" 2>/dev/null
	local ext=$pki/$name.ext
	if [[ -n $san ]]; then
		printf 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=%s\n' "$san" >"$ext"
	else
		printf 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n' >"$ext"
	fi
	openssl x509 -req -in "$pki/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
		-days 3650 -extfile "$ext" -out "$pki/$name.crt" 2>/dev/null
	rm -f "$pki/$name.csr" "$ext"
}
if [[ ! -s $pki/ca.crt ]]; then
	log "making certificates"
	openssl genrsa -out "$pki/ca.key" 2048 2>/dev/null
	openssl req -x509 -new -key "$pki/ca.key" -subj "/CN=agentbox-kube-ca" -days 3650 -out "$pki/ca.crt" 2>/dev/null
	openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
	openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
fi
cert apiserver "/CN=kube-apiserver" \
	"IP:127.0.0.1,IP:10.96.0.1,IP:$host_ip,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
cert admin "/O=system:masters/CN=agentbox-admin"
cert controller-manager "/CN=system:kube-controller-manager"
cert scheduler "/CN=system:kube-scheduler"
cert kubelet "/O=system:nodes/CN=system:node:$NODE"

# kubeconfig NAME: a kubeconfig for the client certificate NAME.
kubeconfig() {
	local name=$1
	cat >"$STATE/$name.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: agentbox
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority: $pki/ca.crt
users:
- name: $name
  user:
    client-certificate: $pki/$name.crt
    client-key: $pki/$name.key
contexts:
- name: agentbox
  context: {cluster: agentbox, user: $name}
current-context: agentbox
EOF
}
for n in admin controller-manager scheduler kubelet; do kubeconfig $n; done
export KUBECONFIG=$STATE/admin.kubeconfig

# --- processes ----------------------------------------------------------------
# start NAME CMD...: runs CMD in its own session, logging to log/NAME.log,
# unless the process of RUN/NAME.pid is alive.
start() {
	local name=$1
	shift
	local pid
	pid=$(cat "$RUN/$name.pid" 2>/dev/null || true)
	if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
		return
	fi
	log "starting $name"
	setsid "$@" >>"$STATE/log/$name.log" 2>&1 </dev/null &
	echo $! >"$RUN/$name.pid"
}

# wait_for WHAT SECONDS CMD...: retries CMD until it succeeds.
wait_for() {
	local what=$1 secs=$2
	shift 2
	local deadline=$(($(date +%s) + secs))
	until "$@" >/dev/null 2>&1; do
		if (($(date +%s) > deadline)); then
			die "$what not ready after ${secs}s; see $STATE/log/"
		fi
		sleep 0.5
	done
}

# CAP_SYS_RESOURCE is bit 24 of the effective set.
restrict_oom=true
if (( (0x$(awk '/^CapEff/ {print $2}' /proc/self/status) >> 24) & 1 )); then
	restrict_oom=false
fi

# containerd: an instance of its own, with the CRI plugin, beside any other
# (Docker's) on the host.
mkdir -p "$STATE/cni/net.d" "$STATE/containerd"
cat >"$STATE/containerd.toml" <<EOF
version = 2
root = "$STATE/containerd"
state = "$RUN/containerd"
[grpc]
  address = "$RUN/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # The kubelet asks for negative OOM score adjustments (-998 for the
  # pause container), which need CAP_SYS_RESOURCE: a root without it (a
  # container, this project's CI machine) gets no sandbox at all. Clamp
  # them to containerd's own instead.
  restrict_oom_score_adj = $restrict_oom
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$STATE/cni/net.d"
EOF
cat >"$STATE/cni/net.d/10-agentbox.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "agentbox",
  "plugins": [
    {"type": "bridge", "bridge": "abkube0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "$POD_CIDR"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
start containerd containerd --config "$STATE/containerd.toml"
ctr() { command ctr --address "$RUN/containerd.sock" "$@"; }
wait_for containerd 30 ctr version

# Images: the pause image is made here from scripts/kube/pause (there is no
# registry to pull it from); the sandbox images come from Docker.
if ! ctr -n k8s.io images ls -q | grep -qx "$PAUSE_IMAGE"; then
	log "importing $PAUSE_IMAGE"
	d=$(mktemp -d)
	mkdir "$d/root"
	cp "$CACHE/bin/pause" "$d/root/pause"
	tar -C "$d/root" --owner=0 --group=0 --numeric-owner -cf "$d/layer.tar" pause
	diff=$(sha256sum "$d/layer.tar" | cut -d' ' -f1)
	printf '{"architecture":"amd64","os":"linux","config":{"Entrypoint":["/pause"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' "$diff" >"$d/config.json"
	printf '[{"Config":"config.json","RepoTags":["%s"],"Layers":["layer.tar"]}]' "$PAUSE_IMAGE" >"$d/manifest.json"
	tar -C "$d" -cf "$d/pause.tar" manifest.json config.json layer.tar
	ctr -n k8s.io images import "$d/pause.tar" >/dev/null
	rm -rf "$d"
fi
if [[ $IMAGES != none ]]; then
	for img in $IMAGES; do
		id=$(docker image inspect -f '{{.Id}}' "$img" 2>/dev/null) ||
			die "image $img is not in Docker (build it with: bin/agentbox image build), or set KUBE_IMAGES=none"
		# Docker names an untagged-registry image docker.io/...; the
		# import keeps that name, which is what the kubelet looks up.
		ref=$img
		[[ $ref == */*/* || $ref == *.*/* ]] || ref=docker.io/$ref
		[[ $ref == *:* ]] || ref=$ref:latest
		if [[ $(cat "$STATE/images/${id#sha256:}" 2>/dev/null) != "$ref" ]]; then
			log "importing $img"
			docker save "$img" | ctr -n k8s.io images import - >/dev/null
			mkdir -p "$STATE/images"
			echo "$ref" >"$STATE/images/${id#sha256:}"
		fi
	done
fi

start etcd "$kube" etcd "$STATE/etcd"
wait_for etcd 60 curl -sf http://127.0.0.1:2379/health

start apiserver "$kube" apiserver \
	--etcd-servers=http://127.0.0.1:2379 \
	--bind-address=0.0.0.0 --secure-port=6443 --advertise-address="$host_ip" \
	--client-ca-file="$pki/ca.crt" \
	--tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
	--kubelet-client-certificate="$pki/apiserver-kubelet-client.crt" \
	--kubelet-client-key="$pki/apiserver-kubelet-client.key" \
	--service-account-issuer=https://kubernetes.default.svc.cluster.local \
	--service-account-key-file="$pki/sa.pub" --service-account-signing-key-file="$pki/sa.key" \
	--service-cluster-ip-range=$SERVICE_CIDR --kubelet-preferred-address-types=InternalIP,Hostname \
	--authorization-mode=Node,RBAC \
	--enable-admission-plugins=NodeRestriction
curlk() { curl -sf --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" "https://127.0.0.1:6443$1"; }
wait_for apiserver 120 curlk /readyz

# NetworkPolicies: enforced by scripts/kube/netpol from before the first
# Pod starts (it reads Pods and policies from the API server and judges
# the first packet of each connection of a Pod). Docker's FORWARD policy
# on this host is DROP: the Pod network is let through it, so that what
# decides is the policies (the enforcer's rules come after FORWARD).
for dir in -s -d; do
	iptables -w -C FORWARD $dir $POD_CIDR -m comment --comment agentbox-kube -j ACCEPT 2>/dev/null ||
		iptables -w -I FORWARD $dir $POD_CIDR -m comment --comment agentbox-kube -j ACCEPT
done
start netpol "$netpol" -kubeconfig "$KUBECONFIG" -node "$NODE" -pod-cidr $POD_CIDR
wait_for "the NetworkPolicy enforcer" 60 iptables -w -t mangle -C POSTROUTING -j AGENTBOX-NETPOL

start controller-manager "$kube" controller-manager \
	--kubeconfig="$STATE/controller-manager.kubeconfig" \
	--authentication-kubeconfig="$STATE/controller-manager.kubeconfig" \
	--authorization-kubeconfig="$STATE/controller-manager.kubeconfig" \
	--service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" \
	--use-service-account-credentials=true \
	--cluster-signing-cert-file="$pki/ca.crt" --cluster-signing-key-file="$pki/ca.key" \
	--leader-elect=false --bind-address=127.0.0.1
start scheduler "$kube" scheduler \
	--kubeconfig="$STATE/scheduler.kubeconfig" \
	--authentication-kubeconfig="$STATE/scheduler.kubeconfig" \
	--authorization-kubeconfig="$STATE/scheduler.kubeconfig" \
	--leader-elect=false --bind-address=127.0.0.1

# The kubelet: cgroupfs on the host's v1 hierarchies (failCgroupV1: false),
# no eviction or image garbage collection (the images were imported by
# hand and cannot be pulled again), no swap check.
mkdir -p "$STATE/kubelet"
cat >"$STATE/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://$RUN/containerd.sock
address: $host_ip
healthzBindAddress: 127.0.0.1
readOnlyPort: 0
clusterDomain: cluster.local
clusterDNS: []
resolvConf: /etc/resolv.conf
evictionHard: {memory.available: "1Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
registerNode: true
EOF
# The kubelet sets these host-wide sysctls on start (vm.overcommit_memory=1,
# kernel.panic=10, kernel.panic_on_oops=1); kube-down.sh puts back what was
# there before the first start.
if [[ ! -s $STATE/sysctl.saved ]]; then
	for k in vm.overcommit_memory kernel.panic kernel.panic_on_oops; do
		echo "$k=$(sysctl -n $k)"
	done >"$STATE/sysctl.saved"
fi
start kubelet "$kube" kubelet \
	--config="$STATE/kubelet.yaml" --kubeconfig="$STATE/kubelet.kubeconfig" \
	--root-dir="$STATE/kubelet" --hostname-override="$NODE" --node-ip="$host_ip"

kubectl() { "$kube" kubectl "$@"; }
wait_for "node $NODE" 180 kubectl get node "$NODE"
kubectl wait --for=condition=Ready "node/$NODE" --timeout=180s >/dev/null ||
	die "node $NODE not Ready; see $STATE/log/kubelet.log"
wait_for "default service account" 60 kubectl -n default get serviceaccount default
log "cluster up: KUBECONFIG=$KUBECONFIG"
echo "$KUBECONFIG"
