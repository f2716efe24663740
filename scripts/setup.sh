#!/usr/bin/env bash
# Installs everything capshim's demo, tests and macOS cross-build need on Debian 12
# (as root, or with sudo). Idempotent: a second run only checks.
#
#   - GCC's Objective-C compiler and runtime (the simulated guest)
#   - the aarch64-apple-darwin Rust target, cargo-zigbuild and zig (the macOS artifacts)
#   - real llama.cpp tools and a tiny model, built from PyPI's llama-cpp-python
#     source into a cache outside the repo (scripts/llama/build.sh)
#
# Set CAPSHIM_SETUP_SKIP_LLAMA=1 to skip the llama.cpp build (the demo does not need it).
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
  PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install --quiet 'cargo-zigbuild==0.24.1'
  if command -v pyenv >/dev/null 2>&1; then pyenv rehash; fi
fi

if [ "${CAPSHIM_SETUP_SKIP_LLAMA:-0}" != 1 ]; then
  bash scripts/llama/build.sh >/dev/null
fi
say "done"
