#!/usr/bin/env bash
# Runs every benchmark script that exists here: the native backend
# (bench/native), snapshots (bench/snapshot) and the docker backend
# (bench/docker) and TLS inspection at the egress proxy (bench/egress),
# one after the other; arguments go to bench/native.
# A script that fails is reported and the others still run; the exit
# status says whether all passed.
set -uo pipefail
cd "$(dirname "$0")/.."

status=0
for name in native snapshot docker egress; do
	script="bench/$name/run.sh"
	if [ ! -f "$script" ]; then
		echo "bench: $script does not exist yet, skipped" >&2
		continue
	fi
	echo "## bench/$name"
	echo
	if [ "$name" = native ]; then
		bash "$script" "$@"
	else
		bash "$script"
	fi
	rc=$?
	if [ $rc -ne 0 ]; then
		echo "bench: $script failed (exit $rc)" >&2
		status=1
	fi
	echo
done
exit $status
