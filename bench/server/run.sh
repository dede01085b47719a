#!/usr/bin/env bash
# Benchmarks agentbox serve against the library in one run on the native
# backend: exec of true in a live session (in-process Session.Exec vs the
# remote backend over a unix socket and TCP loopback), session create,
# 200 concurrent clients x 50 execs, and the server's memory per idle
# session. Prints a Markdown table.
#
#   sudo bench/server/run.sh [-exec N] [-create N] [-clients C] [-per-client N] [-idle N]
#
# Needs root (the native backend as root) and go.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "$(id -u)" != 0 ]; then
	echo "bench/server: run as root (the native backend's sessions as root)" >&2
	exit 1
fi
go build -o bin/bench-server ./bench/server/srvbench
exec bin/bench-server "$@"
