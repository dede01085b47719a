#!/usr/bin/env bash
# Benchmarks the docker backend against the docker CLI in one run: cold
# start (agentbox exec vs docker run --rm) and exec in a live session
# (Session.Exec vs docker exec), p50/p95 and ratios, as a Markdown table.
#
#   bench/docker/run.sh [-cold N] [-exec N] [-image IMG]
#
# Needs a Docker engine (DOCKER_HOST) and go; builds bin/agentbox and the
# base image (cached) first.
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! docker info >/dev/null 2>&1; then
	echo "bench/docker: no Docker engine answers (DOCKER_HOST=${DOCKER_HOST:-unix:///var/run/docker.sock})" >&2
	exit 1
fi
bash scripts/build.sh
bin/agentbox image build >&2
go run ./bench/docker/execbench -agentbox bin/agentbox "$@"
