#!/usr/bin/env bash
# Runs every test of agentbox. As root on Linux this includes the escape
# tests of the native sandbox and, with a Docker engine, the Docker
# conformance suite; with CI=true a test that would skip for a missing
# engine or privilege fails instead.
set -euo pipefail
cd "$(dirname "$0")/.."

# Tests that drive the CLI use the binary make setup just built.
bash scripts/build.sh
export AGENTBOX_BIN=$PWD/bin/agentbox

echo "== go test (all packages)"
# -p 1: some tests check host-wide state (cgroups, mounts) for leaks.
go test -count=1 -p 1 -timeout 40m ./...

echo "== go test -race (packages with goroutines)"
race_pkgs=()
for p in ./sandbox ./sandbox/egress ./sandbox/local ./sandbox/wsfs ./agent ./trace ./snapshot; do
	[[ -d $p ]] && race_pkgs+=("$p")
done
go test -count=1 -race -timeout 20m "${race_pkgs[@]}"
