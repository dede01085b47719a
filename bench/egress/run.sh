#!/usr/bin/env bash
# Benchmarks TLS inspection at the egress proxy against the CONNECT tunnel
# in one run: the latency a small HTTPS request gains once connected, and
# the throughput of a large download. Prints a Markdown table.
#
#   bench/egress/run.sh [-n 2000] [-size 104857600] [-rounds 5] [-h2]
#
# Needs go; no root (the proxy and its loopback upstream run in-process).
set -euo pipefail
cd "$(dirname "$0")/../.."
go build -o bin/bench-egress ./bench/egress/egbench
exec bin/bench-egress "$@"
