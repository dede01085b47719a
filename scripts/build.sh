#!/usr/bin/env bash
# Builds bin/agentbox and bin/agentbox-init, the small binary the native
# backend runs as each sandbox's init when it sits next to agentbox (root
# owned, not group/other writable); without it agentbox re-executes itself.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bin
go build -ldflags "-s -w" -o bin/ ./cmd/agentbox ./sandbox/linux/cmd/agentbox-init
chmod 0755 bin/agentbox bin/agentbox-init
