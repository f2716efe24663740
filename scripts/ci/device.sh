#!/usr/bin/env bash
# The macOS job's real-device suite: capshim doctor, capshim probe stock and under the shim
# (native, apple9-64k), and capshim selftest, with every JSON kept under $EVIDENCE/device and
# the selftest bundle under $EVIDENCE/bundles; tables in the job summary.
#
# Fails (exit 1) when the shim does not activate for a profile, or when selftest fails for
# the default profile (native on these runners, whose chip is known). doctor's warnings and
# failures are reported, not gated: a runner is a guest with its own settings.
set -euo pipefail
# shellcheck source=scripts/ci/summary.sh
source "$(dirname "$0")/summary.sh"

out=${EVIDENCE:?set EVIDENCE to the folder for the evidence}/device
mkdir -p "$out" "$EVIDENCE/bundles"
status=0

capshim --version
summary "### capshim doctor" ""
capshim doctor --verbose || true
capshim doctor --json >"$out/doctor.json" || true
summary "$(checks_table "$out/doctor.json")" ""

# The answers, stock and under each profile; run --require-active exits 4 when nothing was
# hooked, which is the first thing this job exists to show.
capshim probe --json >"$out/probe-stock.json"
profiles=(native apple9-64k)
for p in "${profiles[@]}"; do
  if capshim run --require-active --profile "$p" -- capshim probe --json \
    >"$out/probe-$p.json" 2>"$out/probe-$p.stderr"; then
    echo "shim activated with $p: $(grep 'activated' "$out/probe-$p.stderr" | tail -n 1)"
  else
    status=1
    annotate_error "the shim did not activate with profile $p: $(tail -n 1 "$out/probe-$p.stderr")"
  fi
done
summary "### The device's answers: stock and under the shim" ""
jq -rn --slurpfile s "$out/probe-stock.json" --slurpfile n "$out/probe-native.json" \
  --slurpfile a "$out/probe-apple9-64k.json" '
  def v(x): if x == null then "—" else (x | tostring) end;
  "| answer | stock | native | apple9-64k |", "|---|---|---|---|",
  "| name | \(v($s[0].name)) | \(v($n[0].name)) | \(v($a[0].name)) |",
  "| architecture | \(v($s[0].architecture)) | \(v($n[0].architecture)) | \(v($a[0].architecture)) |",
  ($s[0].families | keys_unsorted[] as $f
    | "| supportsFamily \($f) | \(v($s[0].families[$f])) | \(v($n[0].families[$f])) | \(v($a[0].families[$f])) |"),
  "| maxThreadgroupMemoryLength | \(v($s[0].max_threadgroup_memory)) | \(v($n[0].max_threadgroup_memory)) | \(v($a[0].max_threadgroup_memory)) |"
' 2>/dev/null | to_summary || summary "(a probe printed no JSON: see the log)"
summary ""

# selftest: the claims of the default profile checked with Metal kernels on this GPU.
summary "### capshim selftest" ""
selftest=0
capshim selftest || selftest=$?
capshim selftest --json >"$out/selftest.json" || true
capshim selftest -o "$EVIDENCE/bundles/selftest" >/dev/null || true
if [[ -s $out/selftest.json ]]; then
  summary "$(checks_table "$out/selftest.json")" ""
fi
if [[ $selftest != 0 ]]; then
  status=1
  annotate_error "capshim selftest exited $selftest: a claim of the profile does not hold on this GPU (5), or it failed (1)"
fi
exit "$status"
