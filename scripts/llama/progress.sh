#!/usr/bin/env bash
# Relay a CMake build's progress: reads the build's output on stdin, appends every line to
# LOG, and prints on stderr one line with the build's percentage (CMake's "[ 42%]" prefix)
# at most every INTERVAL seconds, so that a long build shows it is moving without flooding
# the terminal. Prints nothing for output without a percentage.
#
# Usage: cmake --build ... 2>&1 | scripts/llama/progress.sh LOG [INTERVAL]
#   LOG       file the build's output is appended to (created if missing)
#   INTERVAL  least seconds between two progress lines (default 5; 0 prints every new
#             percentage)
set -euo pipefail

main() {
  if [[ $# -lt 1 || $# -gt 2 ]]; then
    echo "progress.sh: usage: progress.sh LOG [INTERVAL]" >&2
    exit 2
  fi
  local log=$1 interval=${2:-5}
  [[ $interval =~ ^[0-9]+$ ]] || { echo "progress.sh: INTERVAL must be whole seconds: $interval" >&2; exit 2; }
  local line pct shown="" last=-1 re='^\[ *([0-9]+)%\]'
  : >>"$log"
  while IFS= read -r line || [[ -n $line ]]; do
    printf '%s\n' "$line" >>"$log"
    [[ $line =~ $re ]] || continue
    pct=${BASH_REMATCH[1]}
    # The first percentage is always shown; later ones when the interval has passed.
    if [[ $pct != "$shown" ]] && { ((last < 0)) || ((SECONDS - last >= interval)); }; then
      printf '[llama-build %s] building: %s%%\n' "$(date +%H:%M:%S)" "$pct" >&2
      shown=$pct
      last=$SECONDS
    fi
  done
}

main "$@"
