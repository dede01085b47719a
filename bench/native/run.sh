#!/usr/bin/env bash
# Benchmarks agentbox's native linux backend against its peers in one run
# on this machine and prints a Markdown report (p50/p95 and ratios):
# cold start of `agentbox exec -- true` against bwrap with comparable
# confinement, unshare of the same namespaces and a bare /bin/true; exec
# in a live session against a bare fork/exec; idle session host memory;
# 100 concurrent sessions.
#
#   bench/native/run.sh [--readme] [--gobench] [driver flags: -cold N -exec N -sessions N -only cold,live,idle,many]
#
# --readme also writes the report into bench/README.md (between its
# bench/native markers); --gobench then runs the backend's own Go
# benchmarks (sandbox/linux/bench_test.go) as a cross-check.
# BENCH_MAX_LOAD=L waits (at most BENCH_WAIT seconds, default 300) for
# the 1-minute load average to fall to L before measuring, for shared
# machines. Needs root, go, bwrap (Debian package bubblewrap) and unshare
# (util-linux); installs nothing.
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
gobench=false
for a in "$@"; do
	case "$a" in
	--readme) readme=(-readme bench/README.md) ;;
	--gobench) gobench=true ;;
	*) args+=("$a") ;;
	esac
done

# Built as installed (scripts/build.sh: agentbox and, beside it, the
# agentbox-init that sessions run as their init); the driver goes next to
# them so that its own sessions use the same init.
mkdir -p bin
if [ -f scripts/build.sh ]; then
	bash scripts/build.sh
else
	go build -o bin/agentbox ./cmd/agentbox
fi
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o bin/bench-native ./bench/native/driver

if [ -n "${BENCH_MAX_LOAD:-}" ]; then
	waited=0
	while load=$(cut -d' ' -f1 /proc/loadavg) && awk -v l="$load" -v m="$BENCH_MAX_LOAD" 'BEGIN{exit !(l > m)}'; do
		if [ "$waited" -ge "${BENCH_WAIT:-300}" ]; then
			echo "bench/native: load average still $load after ${waited}s; measuring anyway" >&2
			break
		fi
		sleep 10
		waited=$((waited + 10))
	done
fi

bin/bench-native -agentbox bin/agentbox "${readme[@]}" "${args[@]}"
if $gobench; then
	echo
	echo "Go benchmarks of sandbox/linux (bench_test.go):"
	echo
	go test -run '^$' -bench 'BareForkExec|ExecOverBare|ColdStart' -benchtime 200x ./sandbox/linux
fi
