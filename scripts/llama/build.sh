#!/usr/bin/env bash
# Build real llama.cpp tools (llama-bench, llama-quantize, llama-perplexity,
# llama-completion, test-backend-ops) plus a tiny random-weight test model, into
# a per-version cache outside the repository. Idempotent: a complete cache is
# detected by stamp files and the script exits at once.
#
# Usage: scripts/llama/build.sh [--metal] [--force] [--check] [--dry-run]
#   --metal    build with llama.cpp's Metal back end (macOS on Apple Silicon
#              only), same llama.cpp version, into its own cache (suffix -metal)
#   --force    rebuild everything even if the cache is complete
#   --check    build nothing: print the paths and exit 0 if the cache is
#              complete, exit 1 otherwise
#   --dry-run  build nothing: print the version, cache, cmake flags and targets
#              this build would use (KEY=VALUE lines), on any system
#
# stdout: KEY=VALUE lines (LLAMA_BENCH=..., TINY_MODEL=..., ...); progress on
# stderr, with the compile's percentage at most every 5 seconds.
#
# Environment:
#   CAPSHIM_LLAMA_CACHE  cache dir (default ${XDG_CACHE_HOME:-$HOME/.cache}/capshim/llama.cpp-py0.3.36,
#                        with -metal appended for --metal)
#   CAPSHIM_LLAMA_JOBS   parallel compile jobs (default 2)
#   PYTHON               python interpreter (default python3)
set -euo pipefail

LLAMA_PY_VERSION=0.3.36
# sha256 of llama_cpp_python-0.3.36.tar.gz on PyPI
LLAMA_PY_SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
# Bump when the cmake flags, target list or cache layout change (forces a rebuild).
RECIPE=1
TARGETS=(llama-bench llama-quantize llama-perplexity llama-completion test-backend-ops)
# The flags both variants share; set_variant adds the back end's.
COMMON_CMAKE_FLAGS=(
  -DCMAKE_BUILD_TYPE=Release
  -DBUILD_SHARED_LIBS=OFF        # static libllama/libggml: binaries are self-contained
  -DGGML_CUDA=OFF -DGGML_VULKAN=OFF -DGGML_BLAS=OFF -DGGML_RPC=OFF
  -DGGML_CCACHE=OFF
  -DLLAMA_OPENSSL=OFF            # no HTTPS model download support needed (LLAMA_CURL is gone in this tree)
  -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_TESTS=ON
  -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF
)
# Seconds between two progress lines of the compile.
PROGRESS_INTERVAL=5

# VARIANT, CMAKE_FLAGS, CACHE_SUFFIX and SMOKE_ARGS for the CPU build (default) or --metal.
set_variant() {
  VARIANT=$1
  if [[ $VARIANT == metal ]]; then
    CMAKE_FLAGS=("${COMMON_CMAKE_FLAGS[@]}"
      # The Metal back end, its shaders embedded in the binaries (no .metallib beside them);
      # the CPU back end tuned for the runner's own chip (the cache is per machine).
      -DGGML_METAL=ON -DGGML_METAL_EMBED_LIBRARY=ON -DGGML_NATIVE=ON)
    CACHE_SUFFIX=-metal
    # A stock paravirtual GPU makes llama.cpp refuse Metal work (unsupported ops): the smoke
    # test checks the tools run, on the CPU, with the Metal device initialised.
    SMOKE_ARGS=(-ngl 0)
  else
    CMAKE_FLAGS=("${COMMON_CMAKE_FLAGS[@]}"
      # portable x86-64: SSE4.2/AVX/AVX2/FMA/F16C/BMI2, no -march=native
      -DGGML_NATIVE=OFF -DGGML_METAL=OFF)
    CACHE_SUFFIX=
    SMOKE_ARGS=()
  fi
}

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
MODEL_SCRIPT="$SCRIPT_DIR/make_tiny_model.py"
PY="${PYTHON:-python3}"
JOBS="${CAPSHIM_LLAMA_JOBS:-2}"

log() { printf '[llama-build %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }
# The steps' times, logged at the end ("NAME: Ns" lines); the build's also goes in BUILD_INFO.
record_time() {
  TIMES_TEXT+="$1: $2s"$'\n'
  if [[ $1 == build ]]; then BUILD_SECONDS=$2; fi
}
usage_error() { echo "build.sh: $*" >&2; exit 2; }

# The cache's paths, once the variant is known.
set_paths() {
  CACHE="${CAPSHIM_LLAMA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/capshim/llama.cpp-py$LLAMA_PY_VERSION$CACHE_SUFFIX}"
  case "$CACHE" in /*) ;; *) CACHE="$PWD/$CACHE" ;; esac   # paths printed are absolute
  BIN="$CACHE/bin"
  MODELS="$CACHE/models"
  Q4_MODEL="$MODELS/tiny-llama-q4_k_m.gguf"
  F16_MODEL="$MODELS/tiny-llama-f16.gguf"
  TOOLS_STAMP="$CACHE/.stamp-tools"
  MODEL_STAMP="$CACHE/.stamp-model"
}

# SHA-256 of a file, in hex: coreutils' sha256sum (Linux) or shasum (macOS).
sha256_of() {
  if command -v sha256sum >/dev/null; then
    sha256sum "$1" | cut -d' ' -f1
  else
    shasum -a 256 "$1" | cut -d' ' -f1
  fi
}

# Stamp contents: what a complete cache was built from. The CPU build's text is unchanged
# from before --metal existed, so existing caches stay complete.
tools_stamp_text() {
  printf 'llama-cpp-python=%s sha256=%s recipe=%s' "$LLAMA_PY_VERSION" "$LLAMA_PY_SHA256" "$RECIPE"
  if [[ $VARIANT == metal ]]; then printf ' variant=metal'; fi
  printf '\n'
}
model_stamp_text() {
  local h
  h="$(sha256_of "$MODEL_SCRIPT")"
  printf '%s make_tiny_model.py=%s\n' "$(tools_stamp_text)" "$h"
}

tools_complete() {
  [[ -f "$TOOLS_STAMP" && "$(cat "$TOOLS_STAMP")" == "$(tools_stamp_text)" ]] || return 1
  local t
  for t in "${TARGETS[@]}"; do [[ -x "$BIN/$t" ]] || return 1; done
  [[ -f "$CACHE/vocab/ggml-vocab-llama-spm.gguf" && -d "$CACHE/gguf-py/gguf" ]]
}
model_complete() {
  [[ -f "$MODEL_STAMP" && "$(cat "$MODEL_STAMP")" == "$(model_stamp_text)" && -s "$Q4_MODEL" && -s "$F16_MODEL" ]]
}

# --help: the comment block at the top of this file.
usage() {
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"
}

# --dry-run: what this build would use, as KEY=VALUE lines.
print_plan() {
  echo "LLAMA_VARIANT=$VARIANT"
  echo "LLAMA_PY_VERSION=$LLAMA_PY_VERSION"
  echo "LLAMA_PY_SHA256=$LLAMA_PY_SHA256"
  echo "LLAMA_CACHE=$CACHE"
  echo "CMAKE_FLAGS=${CMAKE_FLAGS[*]}"
  echo "TARGETS=${TARGETS[*]}"
}

print_paths() {
  echo "LLAMA_BENCH=$BIN/llama-bench"
  echo "TINY_MODEL=$Q4_MODEL"
  echo "TINY_MODEL_F16=$F16_MODEL"
  echo "LLAMA_BIN_DIR=$BIN"
  echo "LLAMA_CACHE=$CACHE"
}

# ---------------------------------------------------------------- prerequisites
ensure_prereqs() {
  command -v "$PY" >/dev/null || die "python3 not found (set PYTHON=)"
  local missing=()
  command -v cc >/dev/null || missing+=(gcc)
  command -v c++ >/dev/null || missing+=(g++)
  command -v make >/dev/null || missing+=(make)
  if ((${#missing[@]})); then
    if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
      log "installing build-essential with apt-get (missing: ${missing[*]})"
      DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq build-essential >&2
    else
      die "missing ${missing[*]}: install a C/C++ toolchain (build-essential)"
    fi
  fi

  local pip_pkgs=()
  CMAKE_BIN="$(command -v cmake || true)"
  if [[ -n "$CMAKE_BIN" ]]; then
    # llama.cpp needs >= 3.14; require 3.18 to be safe.
    local v; v="$("$CMAKE_BIN" --version | head -1 | awk '{print $3}')"
    if ! printf '3.18\n%s\n' "$v" | sort -V -C; then CMAKE_BIN=""; fi
  fi
  if [[ -z "$CMAKE_BIN" ]] && ! "$PY" -c 'import cmake' 2>/dev/null; then pip_pkgs+=("cmake>=3.18,<5"); fi
  "$PY" -c 'import scikit_build_core' 2>/dev/null || pip_pkgs+=("scikit-build-core>=0.9.2")
  "$PY" -c 'import numpy' 2>/dev/null || pip_pkgs+=(numpy)
  "$PY" -c 'import yaml' 2>/dev/null || pip_pkgs+=(pyyaml)
  if ((${#pip_pkgs[@]})); then
    log "pip install ${pip_pkgs[*]}"
    # PIP_BREAK_SYSTEM_PACKAGES: allow a Debian system python (PEP 668); older pips ignore it.
    PIP_BREAK_SYSTEM_PACKAGES=1 "$PY" -m pip install -q --disable-pip-version-check \
      --root-user-action=ignore "${pip_pkgs[@]}" >&2
  fi
  if [[ -z "$CMAKE_BIN" ]]; then
    CMAKE_BIN="$("$PY" -c 'import cmake, os; print(os.path.join(cmake.CMAKE_BIN_DIR, "cmake"))')"
  fi
  [[ -x "$CMAKE_BIN" ]] || die "cmake not usable: $CMAKE_BIN"
  log "cmake: $CMAKE_BIN ($("$CMAKE_BIN" --version | head -1))"
}

# ---------------------------------------------------------------- download + extract
SDIST_NAME="llama_cpp_python-$LLAMA_PY_VERSION"
fetch_source() {
  local t=$SECONDS
  local dl="$WORK/download" tarball="$WORK/download/$SDIST_NAME.tar.gz"
  if [[ ! -f "$tarball" ]] || [[ "$(sha256_of "$tarball")" != "$LLAMA_PY_SHA256" ]]; then
    rm -rf "$dl"; mkdir -p "$dl.tmp"
    log "downloading llama-cpp-python==$LLAMA_PY_VERSION sdist from PyPI"
    # (pip download installs nothing, so it neither warns about root nor takes --root-user-action.)
    "$PY" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
      --no-build-isolation -d "$dl.tmp" "llama-cpp-python==$LLAMA_PY_VERSION" >&2
    [[ -f "$dl.tmp/$SDIST_NAME.tar.gz" ]] || die "pip download did not produce $SDIST_NAME.tar.gz"
    [[ "$(sha256_of "$dl.tmp/$SDIST_NAME.tar.gz")" == "$LLAMA_PY_SHA256" ]] \
      || die "sha256 mismatch for $SDIST_NAME.tar.gz (expected $LLAMA_PY_SHA256)"
    mv "$dl.tmp" "$dl"
  fi
  record_time download $((SECONDS - t))
  t=$SECONDS
  if [[ ! -f "$WORK/src/vendor/llama.cpp/CMakeLists.txt" ]]; then
    log "extracting $SDIST_NAME.tar.gz"
    rm -rf "$WORK/src" "$WORK/src.tmp"; mkdir -p "$WORK/src.tmp"
    tar -xzf "$tarball" -C "$WORK/src.tmp" --strip-components=1
    mv "$WORK/src.tmp" "$WORK/src"
  fi
  record_time extract $((SECONDS - t))
  LLAMA_SRC="$WORK/src/vendor/llama.cpp"
}

# ---------------------------------------------------------------- configure + build
build_tools() {
  local t=$SECONDS bdir="$WORK/build" attempt tgt
  for attempt in 1 2; do
    if [[ $attempt == 2 ]]; then
      log "build failed in a build dir left by an interrupted run; retrying from scratch"
      rm -rf "$bdir"
    fi
    log "configuring llama.cpp ($VARIANT) in $bdir"
    if "$CMAKE_BIN" -S "$LLAMA_SRC" -B "$bdir" "${CMAKE_FLAGS[@]}" >"$WORK/configure.log" 2>&1; then
      "$CMAKE_BIN" --build "$bdir" --target help >"$WORK/targets.txt"
      for tgt in "${TARGETS[@]}"; do
        grep -qE "^(\.\.\. )?$tgt(:| |\$)" "$WORK/targets.txt" || die "target $tgt does not exist in this llama.cpp tree"
      done
      log "building ${TARGETS[*]} with -j$JOBS (log: $WORK/build.log)"
      rm -f "$WORK/build.log"
      if "$CMAKE_BIN" --build "$bdir" -j "$JOBS" --target "${TARGETS[@]}" 2>&1 \
        | bash "$SCRIPT_DIR/progress.sh" "$WORK/build.log" "$PROGRESS_INTERVAL"; then
        break
      fi
    fi
    if [[ $attempt == 2 || $RESUMED == 0 ]]; then
      tail -n 40 "$WORK/configure.log" "$WORK/build.log" >&2 2>/dev/null || true
      die "llama.cpp build failed (logs in $WORK)"
    fi
  done
  record_time build $((SECONDS - t))
  grep -E "Adding CPU backend variant|ggml commit|llama.cpp version|ggml version" "$WORK/configure.log" >&2 || true

  # Stage the tools payload.
  local out="$WORK/out"
  rm -rf "$out"; mkdir -p "$out/bin" "$out/vocab"
  for tgt in "${TARGETS[@]}"; do
    [[ -x "$bdir/bin/$tgt" ]] || die "built binary missing: $bdir/bin/$tgt"
    cp "$bdir/bin/$tgt" "$out/bin/$tgt"
  done
  # With BUILD_SHARED_LIBS=OFF nothing of llama/ggml is dynamic; copy any .so anyway.
  if compgen -G "$bdir/bin/*.so*" >/dev/null; then cp -a "$bdir"/bin/*.so* "$out/bin/"; fi
  if command -v ldd >/dev/null && ldd "$out/bin/llama-bench" | grep -E "not found|libllama|libggml" >&2; then
    log "warning: llama-bench has unexpected dynamic dependencies (above)"
  fi
  cp -r "$LLAMA_SRC/gguf-py" "$out/gguf-py"
  cp "$LLAMA_SRC/models/ggml-vocab-llama-spm.gguf" "$out/vocab/"
  cp "$LLAMA_SRC/LICENSE" "$out/LICENSE-llama.cpp"
  {
    echo "llama-cpp-python $LLAMA_PY_VERSION (sdist sha256 $LLAMA_PY_SHA256), vendor/llama.cpp"
    grep -E "llama.cpp version|ggml version|ggml commit|Adding CPU backend variant" "$WORK/configure.log" || true
    echo "cmake flags: ${CMAKE_FLAGS[*]}"
    echo "targets: ${TARGETS[*]}"
    echo "compiler: $(cc --version | head -1)"
    echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m), build ${BUILD_SECONDS}s with -j$JOBS"
  } >"$out/BUILD_INFO"

  # Commit: invalidate stamps, swap directories in, then write the stamp last.
  rm -f "$TOOLS_STAMP" "$MODEL_STAMP"
  local d
  for d in bin gguf-py vocab; do rm -rf "${CACHE:?}/$d"; mv "$out/$d" "$CACHE/$d"; done
  mv -f "$out/BUILD_INFO" "$out/LICENSE-llama.cpp" "$CACHE/"
  tools_stamp_text >"$CACHE/.stamp-tools.tmp" && mv -f "$CACHE/.stamp-tools.tmp" "$TOOLS_STAMP"
  rm -rf "$out"
}

# ---------------------------------------------------------------- model
build_model() {
  local t=$SECONDS out="$WORK/models"
  rm -rf "$out"; mkdir -p "$out"
  log "generating tiny llama model (random weights, fixed seed)"
  "$PY" "$MODEL_SCRIPT" --gguf-py "$CACHE/gguf-py" \
    --vocab "$CACHE/vocab/ggml-vocab-llama-spm.gguf" --out "$out/tiny-llama-f16.gguf" --outtype f16
  record_time model_gen $((SECONDS - t)); t=$SECONDS
  log "quantizing to Q4_K_M"
  "$BIN/llama-quantize" "$out/tiny-llama-f16.gguf" "$out/tiny-llama-q4_k_m.gguf" Q4_K_M 2 \
    >"$WORK/quantize.log" 2>&1 || { tail -n 30 "$WORK/quantize.log" >&2; die "llama-quantize failed"; }
  record_time quantize $((SECONDS - t)); t=$SECONDS

  log "smoke test: llama-bench on the Q4_K_M model"
  "$BIN/llama-bench" -m "$out/tiny-llama-q4_k_m.gguf" -p 16 -n 4 -r 1 -t 2 ${SMOKE_ARGS[@]+"${SMOKE_ARGS[@]}"} -o json \
    >"$WORK/smoke.json" 2>"$WORK/smoke.stderr" || { cat "$WORK/smoke.stderr" >&2; die "llama-bench smoke test failed"; }
  "$PY" - "$WORK/smoke.json" <<'EOF' || die "llama-bench smoke test output is not as expected"
import json, sys
rows = json.load(open(sys.argv[1]))
assert len(rows) == 2, rows
assert all(r["samples_ts"] and r["avg_ts"] > 0 for r in rows), rows
EOF
  record_time smoke $((SECONDS - t))

  rm -f "$MODEL_STAMP"
  rm -rf "${CACHE:?}/models"; mv "$out" "$CACHE/models"
  model_stamp_text >"$CACHE/.stamp-model.tmp" && mv -f "$CACHE/.stamp-model.tmp" "$MODEL_STAMP"
}

# ---------------------------------------------------------------- main
# Everything runs from functions, so bash has parsed the whole file before the
# first command: editing this script while a build runs cannot break that build.
main() {
  local arg metal=0 dry_run=0
  FORCE=0
  CHECK=0
  for arg in "$@"; do
    case "$arg" in
      --metal) metal=1 ;;
      --force) FORCE=1 ;;
      --check) CHECK=1 ;;
      --dry-run) dry_run=1 ;;
      -h|--help) usage; exit 0 ;;
      *) usage_error "unknown argument: $arg (see --help)" ;;
    esac
  done
  if ((metal)); then set_variant metal; else set_variant cpu; fi
  set_paths
  if ((dry_run)); then
    if ((FORCE || CHECK)); then usage_error "--dry-run builds nothing: it takes no --force or --check"; fi
    print_plan
    exit 0
  fi
  if ((metal)) && [[ "$(uname -s)" != Darwin ]]; then
    usage_error "--metal builds llama.cpp's Metal back end, which needs macOS on Apple Silicon (this is $(uname -s)); --metal --dry-run shows its flags anywhere"
  fi

  if [[ $FORCE == 0 ]] && tools_complete && model_complete; then
    log "cache complete: $CACHE"
    print_paths
    exit 0
  fi
  if [[ $CHECK == 1 ]]; then
    log "cache incomplete: $CACHE (run scripts/llama/build.sh$( ((metal)) && printf ' --metal'))"
    exit 1
  fi

  mkdir -p "$CACHE"

  # One builder at a time per cache; others wait, then find it complete. macOS has no
  # flock(1) unless Homebrew's util-linux is installed: there, one build at a time is the
  # caller's business (CI runs one).
  if command -v flock >/dev/null; then
    exec 9>"$CACHE/.lock"
    if ! flock -n 9; then
      log "another build holds $CACHE/.lock; waiting"
      flock 9
    fi
  else
    log "flock not found: not locking $CACHE (run one build at a time)"
  fi
  if [[ $FORCE == 0 ]] && tools_complete && model_complete; then
    log "cache completed by another run: $CACHE"
    print_paths
    exit 0
  fi

  WORK="$CACHE/.work"        # kept across interrupted runs so compilation resumes
  mkdir -p "$WORK"
  T0=$SECONDS
  TIMES_TEXT=

  if [[ $FORCE == 1 ]]; then rm -f "$TOOLS_STAMP" "$MODEL_STAMP"; fi
  ensure_prereqs
  if ! tools_complete; then
    if [[ $FORCE == 1 ]]; then rm -rf "$WORK/build"; fi
    RESUMED=0
    if [[ -d "$WORK/build" ]]; then RESUMED=1; log "resuming the build left in $WORK/build"; fi
    fetch_source
    build_tools
  fi
  if ! model_complete; then
    build_model
  fi
  if ! { tools_complete && model_complete; }; then die "cache still incomplete after build (bug)"; fi
  rm -rf "$WORK"
  local line
  while IFS= read -r line; do
    if [[ -n $line ]]; then log "time $line"; fi
  done <<<"$TIMES_TEXT"
  log "done in $((SECONDS - T0))s: $CACHE"
  print_paths
}

main "$@"; exit $?
