#!/usr/bin/env bash
# Builds, into bin/, the three programs of agentbox (the same set that
# `go install ./cmd/...` gives), to be kept together:
#   agentbox       the CLI a shell-driven agent runs per command: exec,
#                  session and snapshot on the native and local backends;
#                  the other commands and backends run in agentbox-full
#                  (docs/ARCHITECTURE.md, "Programs", says why);
#   agentbox-full  every command and backend;
#   agentbox-init  the native backend's session init (it links only the
#                  init side of the backend, sandbox/linux/nsinit).
#
# CGO_ENABLED=0: all three are static. Nothing here needs cgo (go-landlock's
# psx falls back to the runtime's AllThreadsSyscall, name lookups to the
# pure Go resolver), and a static binary skips the dynamic loader.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bin
# agentbox refuses to run a sibling from a directory others can write
# (they could swap it): under umask 002 bin/ would be.
chmod go-w bin
export CGO_ENABLED=0
flags=(-trimpath -ldflags "-s -w")
# Each binary is linked into a scratch directory and then copied into
# bin/ (install(1): read and write, then a rename), as an installed
# program is. Started straight from the linker's output (which the
# linker writes through a shared mapping), `agentbox exec -- true` (two
# program starts) took ~0.85 ms longer here than from identical bytes
# copied into place, most likely for how the page cache holds each
# (large folios for a file written with write(2)): bench/README.md has
# the figures.
# A first build compiles every dependency (a few minutes on a small
# machine): say so, or make demo looks stuck.
echo "build: bin/agentbox, bin/agentbox-full, bin/agentbox-init (a first build takes minutes)" >&2
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
go build "${flags[@]}" -o "$scratch/" ./cmd/agentbox ./cmd/agentbox-full ./cmd/agentbox-init
for b in agentbox agentbox-full agentbox-init; do
	install -m 0755 "$scratch/$b" "bin/.$b.new"
	mv -f "bin/.$b.new" "bin/$b"
done
