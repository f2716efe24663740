#!/usr/bin/env bash
# The action's build (action.yml): capshim, libcapshim and the exec guard library, built from
# the action's own source ($GITHUB_ACTION_PATH) with the runner's Rust, release profile, into
# a target folder outside the workspace that the action caches.
#
# Usage: build.sh key     print `restore=...` and `key=...` (for $GITHUB_OUTPUT): the cache
#                         key, from the runner's system and Rust and a hash of the sources,
#                         and the prefix of keys worth restoring (same system)
#        build.sh build   build, put the folder on $GITHUB_PATH, print `capshim=` and `dir=`
set -euo pipefail

src=${GITHUB_ACTION_PATH:-$(cd "$(dirname "$0")/../.." && pwd)}
target=${CAPSHIM_ACTION_TARGET:-$HOME/.cache/capshim/action-target}

need_rust() {
  command -v cargo >/dev/null || {
    echo "::error::capshim's action needs Rust on the runner (GitHub's macOS images have rustup; elsewhere install it first)"
    exit 1
  }
}

case ${1:-} in
  key)
    need_rust
    # Relative paths, so the key does not depend on where the action was unpacked.
    sources=$(cd "$src" && find Cargo.toml Cargo.lock crates -type f ! -path '*/target/*' \
      | LC_ALL=C sort | xargs shasum -a 256 | shasum -a 256 | cut -c1-16)
    prefix="capshim-action-$(uname -s)-$(uname -m)-"
    echo "restore=$prefix"
    echo "key=$prefix$(rustc --version | tr -c 'A-Za-z0-9.\n' '-')-$sources"
    ;;
  build)
    need_rust
    CARGO_TARGET_DIR=$target cargo build --release --locked --manifest-path "$src/Cargo.toml" \
      --workspace --exclude xtask --exclude capshim-simguest
    bin=$target/release
    if [[ -n ${GITHUB_PATH:-} ]]; then echo "$bin" >>"$GITHUB_PATH"; fi
    echo "capshim=$bin/capshim"
    echo "dir=$bin"
    ;;
  *)
    echo "build.sh: usage: build.sh key|build" >&2
    exit 2
    ;;
esac
