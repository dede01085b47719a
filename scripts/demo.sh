#!/usr/bin/env bash
# The main job: the reconciliation agent runs offline (scripted model) in the
# native Linux sandbox; its report is checked and promoted to $1.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-$PWD/out/reconcile}
mkdir -p "$(dirname "$out")" "$PWD/out"
rm -rf "$out"
trace=$PWD/out/reconcile-trace.jsonl
bin/agentbox run \
	--agent examples/reconcile/agent.yaml \
	--trace "$trace" \
	--promote-to "$out" \
	"Reconcile the client's bank statement against the ledger and the invoice list; write output/report.md and output/discrepancies.json."
echo "timeline: bin/agentbox trace show $trace"
