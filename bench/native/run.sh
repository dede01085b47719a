#!/usr/bin/env bash
# Benchmarks agentbox's native linux backend against its peers in one run
# on this machine and prints a Markdown report (p50/p95 and ratios):
# cold start of `agentbox exec -- true` against bwrap with comparable
# confinement, unshare of the same namespaces and a bare /bin/true; exec
# in a live session against a bare fork/exec; idle session host memory;
# 100 concurrent sessions.
#
#   bench/native/run.sh [--readme] [driver flags: -cold N -exec N -sessions N -only cold,live,idle,many]
#
# --readme also writes the report into bench/README.md (between its
# bench/native markers). Needs root, go, bwrap (Debian package
# bubblewrap) and unshare (util-linux); installs nothing.
set -euo pipefail
cd "$(dirname "$0")/../.."

missing=()
[ "$(id -u)" -eq 0 ] || missing+=("root (the linux backend needs it; run with sudo)")
command -v go >/dev/null || missing+=("go (https://go.dev/dl)")
command -v bwrap >/dev/null || missing+=("bwrap (apt-get install bubblewrap)")
command -v unshare >/dev/null || missing+=("unshare (apt-get install util-linux)")
if [ ${#missing[@]} -gt 0 ]; then
	echo "bench/native: missing:" >&2
	printf '  - %s\n' "${missing[@]}" >&2
	exit 1
fi

readme=()
args=()
for a in "$@"; do
	case "$a" in
	--readme) readme=(-readme bench/README.md) ;;
	*) args+=("$a") ;;
	esac
done

mkdir -p bin
go build -o bin/agentbox ./cmd/agentbox
go build -o bin/bench-native ./bench/native/driver
exec bin/bench-native -agentbox bin/agentbox "${readme[@]}" "${args[@]}"
