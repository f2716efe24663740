#!/usr/bin/env bash
# The macOS job's llama.cpp suite on the Metal build of scripts/llama/build.sh --metal:
# capshim bench (stock, native, apple9-64k), capshim verify (native, apple9-64k and the CPU
# back end, each against stock) and, on the tiny model, capshim tune (4 minutes), all with
# --keep-going, so that a stock arm llama.cpp cannot run on this GPU is recorded as failed with
# its reason while the other arms are measured.
# Bundles go to $EVIDENCE/bundles, their reports to the job summary.
#
# Usage: scripts/ci/llama.sh tiny    the tiny random-weight model build.sh makes
#        scripts/ci/llama.sh given   the model at $MODEL_URL (https), checked against
#                                    $MODEL_SHA256 (a workflow_dispatch input)
#
# Fails (exit 1) only when verify's kernel tests (test-backend-ops on the Metal device) fail,
# or did not run, for native. Speedups and the comparisons with stock and with the CPU are
# reported, not gated: the runners are shared and noisy, and CPU and Metal round differently.
set -euo pipefail
# shellcheck source=scripts/ci/summary.sh
source "$(dirname "$0")/summary.sh"

label=${1:?usage: llama.sh tiny|given}
: "${EVIDENCE:?set EVIDENCE to the folder for the evidence}"
mkdir -p "$EVIDENCE/bundles"

llama_env=$(scripts/llama/build.sh --metal)
llama_dir=$(sed -n 's/^LLAMA_BIN_DIR=//p' <<<"$llama_env")
case $label in
  tiny) model=$(sed -n 's/^TINY_MODEL=//p' <<<"$llama_env") ;;
  given)
    [[ ${MODEL_URL:-} == https://* ]] || { annotate_error "model-url must be an https URL"; exit 1; }
    [[ ${MODEL_SHA256:-} =~ ^[0-9a-fA-F]{64}$ ]] || { annotate_error "model-sha256 must be 64 hex digits"; exit 1; }
    model=${RUNNER_TEMP:-/tmp}/given-model.gguf
    curl --fail --location --silent --show-error --proto '=https' -o "$model" -- "$MODEL_URL"
    got=$(shasum -a 256 "$model" | cut -d' ' -f1)
    if [[ $got != "$(tr '[:upper:]' '[:lower:]' <<<"$MODEL_SHA256")" ]]; then
      annotate_error "the model's SHA-256 is $got, not $MODEL_SHA256"
      exit 1
    fi
    ;;
  *) echo "llama.sh: usage: llama.sh tiny|given" >&2; exit 2 ;;
esac

# Writes `capshim report BUNDLE` (the tables and verdicts) into the summary.
report() {
  local title=$1 bundle=$2 rc=$3
  summary "### $title ($label model, exit $rc)" ""
  if [[ -d $bundle ]]; then
    capshim report "$bundle" 2>&1 | to_summary || summary "" "(capshim report refused the bundle: see the log)"
  else
    summary "(no bundle was written: see the log)"
  fi
  summary ""
}

bench=$EVIDENCE/bundles/bench-$label
rc=0
capshim bench -m "$model" --llama-dir "$llama_dir" --arm native --arm apple9-64k \
  --keep-going --rounds 6 -p 128 -n 32 -o "$bench" || rc=$?
report "capshim bench" "$bench" "$rc"

verify=$EVIDENCE/bundles/verify-$label
rc=0
capshim verify -m "$model" --llama-dir "$llama_dir" --arm native --arm apple9-64k \
  --arm cpu=stock,LLAMA_ARG_N_GPU_LAYERS=0 --keep-going -o "$verify" || rc=$?
report "capshim verify" "$verify" "$rc"

# tune on the tiny model: the first measurement of the GGML_METAL knobs on paravirtual Metal.
# Reported, not gated (a shared runner is noisy; a null winner is a result).
if [[ $label == tiny ]]; then
  tune=$EVIDENCE/bundles/tune-$label
  rc=0
  capshim tune -m "$model" --llama-dir "$llama_dir" --budget 4m --keep-going -p 128 -n 32 \
    -o "$tune" || rc=$?
  report "capshim tune" "$tune" "$rc"
fi

# The gate: native's kernel tests ran on the Metal device and none failed.
kernels=$(jq -c '.arms.native.kernel_tests // null' "$verify/summary.json" 2>/dev/null || echo null)
if [[ $kernels == null ]]; then
  note=$(jq -r '.arms.native.kernel_tests_note // "no summary.json"' "$verify/summary.json" 2>/dev/null || echo "no summary.json")
  annotate_error "verify's kernel tests did not run for native ($label model): $note"
  exit 1
fi
failed=$(jq -r '.failed' <<<"$kernels")
if [[ $failed != 0 ]]; then
  annotate_error "verify's kernel tests failed for native ($label model): $failed cases: $(jq -r '.failing | join(", ")' <<<"$kernels")"
  exit 1
fi
echo "native's kernel tests: $(jq -r '"\(.passed) passed, \(.unsupported) unsupported on \(.device)"' <<<"$kernels")"
