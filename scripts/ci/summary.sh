#!/usr/bin/env bash
# Helpers for the CI scripts (sourced, not run): where the job summary goes, and check lists
# (capshim doctor's and selftest's --json shape) as Markdown tables.

# Appends stdin to the job summary: $GITHUB_STEP_SUMMARY on GitHub, stdout elsewhere.
to_summary() {
  if [[ -n ${GITHUB_STEP_SUMMARY:-} ]]; then cat >>"$GITHUB_STEP_SUMMARY"; else cat; fi
}

# Appends its arguments, one line each, to the job summary.
summary() { printf '%s\n' "$@" | to_summary; }

# A Markdown table of FILE's "checks" ([{id, status, summary, fix, ...}]): one row per check.
# Pipes in the text are escaped so that a summary cannot break the table.
checks_table() {
  jq -r '
    def cell: (. // "") | tostring | gsub("\\|"; "\\|") | gsub("\n"; " ");
    "| status | check | summary | fix |", "|---|---|---|---|",
    (.checks[] | "| \(.status | cell) | `\(.id | cell)` | \(.summary | cell) | \(.fix | cell) |")
  ' "$1"
}

# Prints a GitHub error annotation (and the message on stderr elsewhere).
annotate_error() {
  if [[ -n ${GITHUB_ACTIONS:-} ]]; then echo "::error::$*"; else echo "error: $*" >&2; fi
}
annotate_warning() {
  if [[ -n ${GITHUB_ACTIONS:-} ]]; then echo "::warning::$*"; else echo "warning: $*" >&2; fi
}
