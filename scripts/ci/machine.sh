#!/usr/bin/env bash
# The macOS job's first step: what machine this is (macOS version, chip, model, CPUs,
# memory), System Integrity Protection, and the shell later steps start in (the runner
# resolves `bash` on PATH) with its architectures, into the log and the job summary.
set -euo pipefail
# shellcheck source=scripts/ci/summary.sh
source "$(dirname "$0")/summary.sh"

sip=$(csrutil status 2>&1 || true)
step_bash=$(command -v bash)
facts=(
  "macOS|$(sw_vers -productVersion) ($(sw_vers -buildVersion))"
  "chip|$(sysctl -n machdep.cpu.brand_string)"
  "model|$(sysctl -n hw.model)"
  "CPUs|$(sysctl -n hw.ncpu)"
  "memory|$(($(sysctl -n hw.memsize) / 1073741824)) GiB"
  "virtual machine|$(sysctl -n kern.hv_vmm_present 2>/dev/null || echo unknown)"
  "SIP|$sip"
  "step shell (bash on PATH)|$step_bash: $(lipo -archs "$step_bash" 2>&1)"
  "/bin/bash|$(lipo -archs /bin/bash 2>&1)"
  "/bin/sh|$(lipo -archs /bin/sh 2>&1)"
)
summary "### The machine" "" "| fact | value |" "|---|---|"
for fact in "${facts[@]}"; do
  printf '%-28s %s\n' "${fact%%|*}:" "${fact#*|}"
  summary "| ${fact%%|*} | \`${fact#*|}\` |"
done
summary ""
