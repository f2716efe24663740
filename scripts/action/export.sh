#!/usr/bin/env bash
# The action's export step (action.yml). With INPUT_EXPORT=true it writes the shim's variables
# to $GITHUB_ENV, so that later steps run with the shim, but only when that is both safe and
# effective for the shell those steps start in; otherwise it refuses, saying why and what to
# do instead (`capshim run -- ...` in the step). Either way capshim is already on PATH.
#
# What reaches a step depends on System Integrity Protection and on the step's shell, which
# the runner starts (not a process that loaded the library):
#   - SIP on: dyld removes every DYLD_* variable when it starts one of Apple's programs
#     (/bin/bash, /bin/sh, /usr/bin/env...), so a step in Apple's shell never sees the shim.
#   - SIP off: dyld gives Apple's arm64e programs the library, which has no arm64e slice, and
#     terminates them. The exec guard library (libcapshim_guard.dylib) removes the variables
#     before such a program is started, but only from a process that loaded it: it cannot
#     protect a shell the runner itself starts.
# So: export only for a shell that can load the library (an arm64 program outside Apple's
# system folders, e.g. Homebrew's bash, which `bash` resolves to on GitHub's macOS images),
# with the plain library when SIP is on and the guard library when it is off. Then start that
# shell the way the runner starts a step, with nothing but those variables, and check that an
# Apple program it runs survives and that a Metal program it runs is hooked; export only then.
#
# Inputs (environment): INPUT_EXPORT (true/false), INPUT_PROFILE, INPUT_SCOPE,
# INPUT_ONLY_PROCESS, INPUT_SHELL (a name looked up on PATH, or a path), CAPSHIM (the
# executable). Outputs ($GITHUB_OUTPUT): exported=true|false, reason=...
#
# `export.sh --decide OS SIP SHELL_PATH ARCHS SCOPE ONLY_PROCESS GUARD` prints the decision
# alone, from given facts (SIP: on, off or unknown; GUARD: yes or no): `export plain`,
# `export guard`, or `refuse: REASON`. The tests use it.
set -euo pipefail

# Folders whose programs are Apple's own: SIP-protected, arm64e on Apple Silicon.
APPLE_DIRS=(/bin/ /sbin/ /usr/bin/ /usr/sbin/ /usr/libexec/ /usr/lib/ /System/)

# The decision from the facts; see the header.
decide() {
  local os=$1 sip=$2 shell=$3 archs=$4 scope=$5 only=$6 guard=$7 d apple=0
  if [[ $os != Darwin ]]; then
    echo "refuse: this runner is $os, not macOS: capshim's shim is for macOS on Apple Silicon"
    return
  fi
  if [[ -z $shell ]]; then
    echo "refuse: the step shell was not found on PATH"
    return
  fi
  case ${shell##*/} in
    bash | zsh | sh | dash | ksh) ;;
    *)
      echo "refuse: ${shell##*/} is not a POSIX shell; the action checks bash, zsh, sh, dash and ksh steps only"
      return
      ;;
  esac
  if [[ $scope == process && -z $only ]]; then
    echo "refuse: with scope process the step's shell would be the one process the shim acts in, and every program it starts would stay stock; give only-process too"
    return
  fi
  for d in "${APPLE_DIRS[@]}"; do [[ $shell == "$d"* ]] && apple=1; done
  # The library is arm64: a program without an arm64 slice (Apple's are x86_64 + arm64e)
  # cannot load it.
  [[ " $archs " == *" arm64 "* ]] || apple=1
  case $sip in
    on | off) ;;
    *)
      echo "refuse: System Integrity Protection's state is unknown (csrutil status), so whether the shim would reach the steps, or end them, is unknown"
      return
      ;;
  esac
  if ((apple)) && [[ $sip == on ]]; then
    echo "refuse: $shell is one of Apple's programs and SIP is on: dyld removes DYLD_INSERT_LIBRARIES when it starts, so the shim would reach no program of the step"
  elif ((apple)); then
    echo "refuse: $shell is one of Apple's programs ($archs) and SIP is off: dyld would terminate it when given the library, which has no arm64e slice; the exec guard cannot help, because the runner, not a process that loaded it, starts the step's shell"
  elif [[ $sip == on ]]; then
    echo "export plain"
  elif [[ $guard == yes ]]; then
    echo "export guard"
  else
    echo "refuse: SIP is off and this capshim has no guard library (libcapshim_guard.dylib): Apple's programs the steps start would be terminated by dyld"
  fi
}

if [[ ${1:-} == --decide ]]; then
  shift
  [[ $# == 7 ]] || { echo "export.sh: --decide OS SIP SHELL_PATH ARCHS SCOPE ONLY_PROCESS GUARD" >&2; exit 2; }
  decide "$@"
  exit 0
fi

# shellcheck source=scripts/ci/summary.sh
source "$(dirname "$0")/../ci/summary.sh"

capshim=${CAPSHIM:?set CAPSHIM to the capshim executable}
profile=${INPUT_PROFILE:-native}
scope=${INPUT_SCOPE:-children}
only=${INPUT_ONLY_PROCESS:-}
output() { if [[ -n ${GITHUB_OUTPUT:-} ]]; then printf '%s=%s\n' "$1" "$2" >>"$GITHUB_OUTPUT"; fi; }
alternative="run the programs with \`capshim run --profile $profile -- PROGRAM ...\` in the step; the action put capshim on PATH"

refuse() {
  annotate_warning "capshim: not exported: $1; instead, $alternative"
  summary "### capshim: not exported" "" "$1." "" "Instead, $alternative." ""
  output exported false
  output reason "$1"
  exit 0
}

if [[ ${INPUT_EXPORT:-false} != true ]]; then
  summary "### capshim" "" "capshim is on PATH: $alternative." ""
  output exported false
  output reason "export is false"
  exit 0
fi

case $scope in children | process) ;; *) refuse "scope must be children or process, not $scope" ;; esac

# The facts: the system, SIP, the step shell and its architectures, the guard library.
os=$(uname -s)
sip=unknown
sip_text=""
if [[ $os == Darwin ]]; then
  sip_text=$(csrutil status 2>&1 || true)
  case $sip_text in
    *"status: enabled."*) sip=on ;;
    *"status: disabled."*) sip=off ;;
  esac
fi
step_shell=${INPUT_SHELL:-bash}
if [[ $step_shell == */* ]]; then shell_path=$step_shell; else shell_path=$(command -v "$step_shell" || true); fi
archs=""
if [[ -n $shell_path && $os == Darwin ]]; then archs=$(lipo -archs "$shell_path" 2>/dev/null || true); fi
dir=$(dirname "$capshim")
guard=no
[[ -f $dir/libcapshim_guard.dylib ]] && guard=yes

decision=$(decide "$os" "$sip" "$shell_path" "$archs" "$scope" "$only" "$guard")
echo "capshim: SIP: $sip ($sip_text); step shell: $shell_path ($archs); guard library: $guard"
echo "capshim: decision: $decision"
[[ $decision == refuse:* ]] && refuse "${decision#refuse: }"
if [[ $decision == "export guard" ]]; then lib=$dir/libcapshim_guard.dylib; else lib=$dir/libcapshim.dylib; fi

# The variables exactly as capshim sets them for a launchd job (capshim agent's plist).
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$capshim" agent --label capshim.github-action --skip-preflight --dylib "$lib" --profile "$profile" \
  --scope "$scope" ${only:+--only-process "$only"} -- /usr/bin/true >"$tmp/agent.plist" 2>"$tmp/agent.stderr" \
  || refuse "capshim agent refused the settings: $(tail -n 1 "$tmp/agent.stderr")"
plutil -extract EnvironmentVariables json -o - "$tmp/agent.plist" \
  | jq -r 'to_entries[] | "\(.key)=\(.value)"' >"$tmp/vars"
grep -q '^DYLD_INSERT_LIBRARIES=' "$tmp/vars" || refuse "capshim agent set no DYLD_INSERT_LIBRARIES"

# The check: the step shell started with only these variables (and none inherited), as the
# runner starts a step; in it an Apple program must survive and a Metal program be hooked.
# The Metal program is capshim's probe, under the only-process name when one is given.
probe=$capshim
if [[ -n $only ]]; then
  mkdir -p "$tmp/bin"
  cp "$capshim" "$tmp/bin/$only"
  probe=$tmp/bin/$only
fi
clean_env() {
  local v
  unset DYLD_INSERT_LIBRARIES
  for v in ${!CAPSHIM_@}; do unset "$v"; done
}
(clean_env; exec "$probe" probe --json) >"$tmp/stock.json" 2>"$tmp/stock.stderr" \
  || refuse "capshim probe failed stock: $(tail -n 1 "$tmp/stock.stderr")"
check_rc=0
(
  clean_env
  while IFS= read -r line; do export "${line?}"; done <"$tmp/vars"
  export CAPSHIM_STATUS_FILE="$tmp/status.jsonl"
  # shellcheck disable=SC2016 # "$0" is expanded by the started shell: it is the probe.
  exec "$shell_path" --noprofile --norc -eo pipefail -c '/usr/bin/true && "$0" probe --json' "$probe"
) >"$tmp/shimmed.json" 2>"$tmp/shimmed.stderr" || check_rc=$?
if [[ $check_rc != 0 ]]; then
  refuse "$shell_path, started with the shim's variables as a step would be, failed (exit $check_rc: $(tail -n 1 "$tmp/shimmed.stderr")); an Apple program or the probe did not survive"
fi
if ! grep -q '"event":"hooked"' "$tmp/status.jsonl" 2>/dev/null; then
  refuse "a Metal program started from $shell_path with the shim's variables was not hooked (status: $(tail -n 1 "$tmp/status.jsonl" 2>/dev/null || echo none))"
fi

# Safe and effective: export.
cat "$tmp/vars" >>"${GITHUB_ENV:?}"
output exported true
output reason "$decision"
{
  echo "### capshim: exported to the later steps"
  echo
  echo "SIP is $sip; the steps' shell is \`$shell_path\` (\`$archs\`), which loads the library; library: \`$lib\`."
  echo "Checked by starting that shell as a step is started: \`/usr/bin/true\` ran, and \`${probe##*/} probe\` was hooked."
  echo
  echo "| variable | value |"
  echo "|---|---|"
  # shellcheck disable=SC2016 # the backquotes are Markdown's, not the shell's.
  sed 's/^\([^=]*\)=\(.*\)$/| `\1` | `\2` |/' "$tmp/vars"
  echo
  echo "| answer | stock | with the shim |"
  echo "|---|---|---|"
  jq -rn --slurpfile s "$tmp/stock.json" --slurpfile u "$tmp/shimmed.json" '
    ($s[0].families | keys_unsorted[] as $f
      | select($s[0].families[$f] != $u[0].families[$f])
      | "| supportsFamily \($f) | \($s[0].families[$f]) | \($u[0].families[$f]) |"),
    "| maxThreadgroupMemoryLength | \($s[0].max_threadgroup_memory) | \($u[0].max_threadgroup_memory) |"' \
    || echo "| (the probe printed no JSON) | | |"
  echo
  echo "Only steps that run in \`$shell_path\` (\`shell: bash\`, the default) keep it; \`shell: sh\` and programs started through Apple's (\`/usr/bin/env\`, \`/bin/sh -c\`) do not."
  echo
} | to_summary
