#!/usr/bin/env bash
# Installs what agentbox's demo and benchmarks need on a fresh Debian 12 host
# (`setup.sh test`: and what the tests need), and builds the Docker base
# image when an engine answers.
# Idempotent: packages already present and an up-to-date image are skipped.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages and the command that proves each is present.
declare -A need=(
	[git]=git [python3]=/usr/bin/python3 [e2fsprogs]=mkfs.ext4 [zstd]=zstd
	[bubblewrap]=bwrap [util-linux]=unshare [iproute2]=ip [iptables]=iptables
	[curl]=curl
)
# The tests also open the HTML trace in a headless browser
# (trace/html_test.go), which the demo does not need,
# and measure what CRIU makes of a native session (sandbox/linux's
# hibernate tests).
if [[ ${1:-} == test ]]; then
	need[chromium]=chromium
	need[criu]=criu
fi
missing=()
for pkg in "${!need[@]}"; do
	command -v "${need[$pkg]}" >/dev/null 2>&1 || missing+=("$pkg")
done
if ((${#missing[@]})); then
	if [[ $(id -u) -ne 0 ]]; then
		echo "setup: missing packages: ${missing[*]} (run as root or: sudo apt-get install ${missing[*]})" >&2
		exit 1
	fi
	echo "setup: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

bash scripts/build.sh

# The host ids the native backend's sessions run as (one slot of 65536 per
# live session): a block no host account owns, reserved in /etc/subuid and
# /etc/subgid under the name agentbox (sandbox/linux/ids.go). The block is
# the backend's default, which it also checks without the entry.
if [[ $(id -u) -eq 0 ]]; then
	for f in /etc/subuid /etc/subgid; do
		if ! grep -q '^agentbox:' "$f" 2>/dev/null; then
			echo "setup: reserving host ids 1879048192-2147483647 for sandboxes in $f"
			echo "agentbox:1879048192:268435456" >>"$f"
		fi
	done
fi

# staticcheck runs in make vet (the version is pinned for reproducible CI).
staticcheck=$(go env GOPATH)/bin/staticcheck
if ! "$staticcheck" -version 2>/dev/null | grep -q '(0.8.2)'; then
	go install honnef.co/go/tools/cmd/staticcheck@v0.8.2
fi

if docker info >/dev/null 2>&1; then
	bin/agentbox image build
else
	echo "setup: no Docker engine answers (DOCKER_HOST=${DOCKER_HOST:-unix:///var/run/docker.sock}); skipping the base image" >&2
fi
