#!/usr/bin/env bash
# Runs every test of agentbox. As root on Linux this includes the escape
# tests of the native sandbox and, with a Docker engine, the Docker
# conformance suite, and the kube backend's tests on a single-node
# Kubernetes cluster this script starts (scripts/kube-up.sh; its first
# start builds the cluster from source, about 20 CPU-minutes, cached in
# /var/cache/agentbox-kube); with CI=true a test that would skip for a
# missing engine, privilege or cluster fails instead (internal/testenv).
#
# Each go test runs with -json through internal/cmd/testreport, which
# prints failures and skips readably, keeps the raw events in out/test/,
# and, with CI=true, fails the run on a skip that scripts/skips.allow does
# not list (outside CI it lists them). pipefail keeps go test's own exit
# status: a failed test fails the run even if the report passed.
set -euo pipefail
cd "$(dirname "$0")/.."

# Tests that drive the CLI use the binary make setup just built.
bash scripts/build.sh
export AGENTBOX_BIN=$PWD/bin/agentbox

# The reporter is built first, so that a broken one stops the run before
# the suite, not after it.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
report=$tmp/testreport
go build -o "$report" ./internal/cmd/testreport
rm -rf out/test

fail_skips=false
if [[ ${CI:-} == true ]]; then
	fail_skips=true
fi

# gotest NAME ARGS... runs go test -json ARGS, reported; the events go to
# out/test/NAME.json.
gotest() {
	local name=$1
	shift
	go test -json "$@" | "$report" -allow scripts/skips.allow -fail-skips=$fail_skips -events "out/test/$name.json"
}

echo "== go test (all packages)"
# -p 1: some tests check host-wide state (cgroups, mounts) for leaks.
gotest all -count=1 -p 1 -timeout 40m ./...

echo "== go test -race (packages with goroutines)"
race_pkgs=()
for p in ./sandbox ./sandbox/egress ./sandbox/local ./sandbox/wsfs ./agent ./trace ./snapshot \
	./sandbox/linux ./sandbox/docker ./cmd/agentbox; do
	[[ -d $p ]] && race_pkgs+=("$p")
done
# -p 1 as above: sandbox/linux and sandbox/docker check host-wide state.
gotest race -count=1 -p 1 -race -timeout 30m "${race_pkgs[@]}"

echo "== go test -tags kube (the kube backend on a real cluster)"
# The tests built only with -tags kube need a cluster, which kube-up.sh
# starts here when run as root and which is stopped again afterwards
# unless it was already running. Not root: the tests skip (and fail in
# CI, where the run is root). They are sandbox/kube's and cmd/agentbox's
# TestKube* (the rest of cmd/agentbox ran above); a new kube-tagged test
# file elsewhere must be added here.
if [[ $(id -u) -eq 0 ]]; then
	started_kube=false
	if ! kill -0 "$(cat /run/agentbox-kube/apiserver.pid 2>/dev/null)" 2>/dev/null; then
		started_kube=true
		trap 'rm -rf "$tmp"; bash scripts/kube-down.sh' EXIT
	fi
	bash scripts/kube-up.sh >/dev/null
	export AGENTBOX_KUBECONFIG=/var/lib/agentbox-kube/admin.kubeconfig
	[[ $started_kube == true ]] || echo "(the cluster was already running: it is left running)"
fi
gotest kube -count=1 -tags kube -timeout 30m ./sandbox/kube
gotest kube-cli -count=1 -tags kube -timeout 20m -run '^TestKube' ./cmd/agentbox
