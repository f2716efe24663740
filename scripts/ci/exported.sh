#!/usr/bin/env bash
# The macOS job's check of the action's export: runs in an ordinary step after
# `uses: ./` with `export: true`, started by the runner the way every step is.
#
# With EXPORTED=true the shim's variables must have reached this step, and a Metal program
# started from it with nothing but them (`capshim probe`, no `capshim run`) must answer as
# `capshim run --profile native` made it answer in device.sh. With EXPORTED=false nothing may
# have been exported. Exit 1 when the action's word and this step disagree.
set -euo pipefail
# shellcheck source=scripts/ci/summary.sh
source "$(dirname "$0")/summary.sh"

out=${EVIDENCE:?set EVIDENCE to the folder for the evidence}/device
mkdir -p "$out"
summary "### What the action's export reached" ""
if [[ ${EXPORTED:-} != true ]]; then
  if [[ -n ${DYLD_INSERT_LIBRARIES:-} ]]; then
    annotate_error "the action did not export, yet DYLD_INSERT_LIBRARIES=$DYLD_INSERT_LIBRARIES reached this step"
    exit 1
  fi
  summary "The action refused to export (its summary above says why); this step runs stock."
  exit 0
fi
if [[ -z ${DYLD_INSERT_LIBRARIES:-} ]]; then
  annotate_error "the action said it exported, but DYLD_INSERT_LIBRARIES did not reach this step"
  exit 1
fi
capshim probe --json >"$out/probe-exported.json"
if ! jq -e --slurpfile want "$out/probe-native.json" \
  '.families == $want[0].families and .max_threadgroup_memory == $want[0].max_threadgroup_memory' \
  "$out/probe-exported.json" >/dev/null; then
  annotate_error "capshim probe in this step does not answer as under capshim run --profile native: compare probe-exported.json with probe-native.json in the evidence"
  exit 1
fi
summary "This step's \`capshim probe\` (started with only the exported variables) answers as \`capshim run --profile native\` does: the export reaches the steps' programs." ""
