#!/usr/bin/env bash
# The action's doctor step: `capshim doctor` into the log, its checks as a table in the job
# summary. Reported, never failing the step: what it finds is for the reader.
set -euo pipefail
# shellcheck source=scripts/ci/summary.sh
source "$(dirname "$0")/../ci/summary.sh"

capshim=${CAPSHIM:?set CAPSHIM to the capshim executable}
json=$(mktemp)
"$capshim" doctor || true
"$capshim" doctor --json >"$json" || true
summary "### capshim doctor" ""
if jq -e '.checks' "$json" >/dev/null 2>&1; then
  summary "$(checks_table "$json")" ""
else
  summary "(capshim doctor printed no JSON: see the log)" ""
fi
rm -f "$json"
