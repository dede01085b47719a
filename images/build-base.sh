#!/usr/bin/env bash
# Builds agentbox/base:latest, the docker backend's default image, from this
# host's own programs (no registry, no network): sh, coreutils, python3 and
# its standard library, git, and their shared libraries, imported with the
# engine's image import API. Cached: an image whose agentbox.content label
# matches the host files is kept. Pass --force to rebuild.
#
# The file list lives in sandbox/docker/rootfs.go (baseTools); this script
# is the same as `agentbox image build`.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -x bin/agentbox ]]; then
	exec bin/agentbox image build "$@"
fi
exec go run ./cmd/agentbox image build "$@"
