#!/usr/bin/env bash
# Builds, into bin/:
#   agentbox       the CLI, lean: the plain exec (linux and local backends,
#                  no manifest or snapshot); every other command, and an exec that
#                  needs more, hands off to agentbox-full
#                  (cmd/agentbox/handoff.go says why: start-up time);
#   agentbox-full  the same CLI with everything linked in;
#   agentbox-init  the small program the native backend runs as each
#                  sandbox's init when it sits next to agentbox (root owned,
#                  not group/other writable); without it agentbox re-executes
#                  itself. It links only the init side of the backend
#                  (sandbox/linux/nsinit): the egress proxy runs in the
#                  client, never in the init.
#
# CGO_ENABLED=0: all three are static. Nothing here needs cgo (go-landlock's
# psx falls back to the runtime's AllThreadsSyscall, name lookups to the
# pure Go resolver), and a static binary skips the dynamic loader, which
# `agentbox exec` pays twice (the CLI and the sandbox's init).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bin
# The lean agentbox refuses to hand off to an agentbox-full in a directory
# others can write (they could swap it): under umask 002 bin/ would be.
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
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
go build "${flags[@]}" -tags lean -o "$scratch/agentbox" ./cmd/agentbox
go build "${flags[@]}" -o "$scratch/agentbox-full" ./cmd/agentbox
go build "${flags[@]}" -o "$scratch/agentbox-init" ./cmd/agentbox-init
for b in agentbox agentbox-full agentbox-init; do
	install -m 0755 "$scratch/$b" "bin/.$b.new"
	mv -f "bin/.$b.new" "bin/$b"
done
