#!/usr/bin/env bash
# Lints what cargo does not: the GitHub workflows and the action (actionlint; zizmor,
# offline, failing on any finding of medium severity or above) and the shell scripts
# (shellcheck), with the versions scripts/setup.sh installs into its lint venv
# (${XDG_CACHE_HOME:-~/.cache}/capshim/lint-venv, or CAPSHIM_LINT_VENV).
# Exit 0 when all three are clean, 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=${CAPSHIM_LINT_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/capshim/lint-venv}
for tool in actionlint zizmor shellcheck; do
  if [[ ! -x $venv/bin/$tool ]]; then
    echo "lint.sh: $venv/bin/$tool is missing: run scripts/setup.sh" >&2
    exit 1
  fi
done

scripts=(.ci/run scripts/*.sh scripts/*/*.sh)
status=0
# actionlint also runs shellcheck on every run: block of the workflows.
"$venv/bin/actionlint" -shellcheck "$venv/bin/shellcheck" -pyflakes= || status=1
"$venv/bin/zizmor" --offline --quiet --min-severity medium .github/workflows action.yml || status=1
"$venv/bin/shellcheck" -x "${scripts[@]}" || status=1
if [[ $status == 0 ]]; then
  echo "lint.sh: actionlint, zizmor and shellcheck clean (${#scripts[@]} scripts)" >&2
fi
exit "$status"
