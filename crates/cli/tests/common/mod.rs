//! Helpers shared by the integration tests: the binary under test, where the real shim and
//! the real llama-bench are, checks of `capshim report` on a bundle, and llama-bench output
//! files with known samples.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use predicates::prelude::*;

/// The shim library's file name on this platform.
pub const SHIM_NAME: &str = if cfg!(target_os = "macos") {
    "libcapshim.dylib"
} else {
    "libcapshim.so"
};

/// The variable the dynamic loader injects libraries from on this platform.
pub const INJECTION_VAR: &str = if cfg!(target_os = "macos") {
    "DYLD_INSERT_LIBRARIES"
} else {
    "LD_PRELOAD"
};

/// The `capshim` binary under test, without any shim settings of the environment the tests
/// run in (`CAPSHIM_*`, `LUME_METAL_*`, the injection variable), so that exactly what a test
/// gives applies.
pub fn capshim() -> assert_cmd::Command {
    let mut cmd = assert_cmd::Command::cargo_bin("capshim").unwrap();
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy().into_owned();
        if name.starts_with("CAPSHIM_") || name.starts_with("LUME_METAL_") || name == INJECTION_VAR
        {
            cmd.env_remove(name);
        }
    }
    cmd
}

/// `capshim bench -m MODEL --llama-bench LLAMA_BENCH`, for a test to add its options to.
pub fn bench(llama_bench: &Path, model: &Path) -> assert_cmd::Command {
    let mut cmd = capshim();
    cmd.arg("bench")
        .arg("-m")
        .arg(model)
        .arg("--llama-bench")
        .arg(llama_bench);
    cmd
}

/// Where cargo builds the real shim: next to the `capshim` binary under test, the first place
/// `capshim run` and `capshim bench` look. The path is not canonicalized.
pub fn shim_next_to_capshim() -> PathBuf {
    assert_cmd::cargo::cargo_bin("capshim").with_file_name(SHIM_NAME)
}

/// The real shim next to the `capshim` binary; panics (never skips) when it is not built or
/// is older than its sources.
pub fn real_shim() -> PathBuf {
    let so = shim_next_to_capshim();
    assert!(
        so.exists(),
        "{} is missing: build the shim with `cargo build -p capshim` (cargo test --workspace does)",
        so.display()
    );
    assert_fresh(&so);
    so
}

/// Panics when `so` is older than the newest file under crates/shim/src or
/// crates/profile/src: `cargo test` does not rebuild the cdylib, so a library left from an
/// earlier build would test old code without saying so.
pub fn assert_fresh(so: &Path) {
    let built = std::fs::metadata(so)
        .and_then(|m| m.modified())
        .unwrap_or_else(|e| panic!("{}: {e}", so.display()));
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for source in [crates.join("shim/src"), crates.join("profile/src")] {
        let (newest, file) = newest_file(&source);
        assert!(
            newest <= built,
            "{} is older than {} (the sources in {}): rebuild it with cargo build -p capshim",
            so.display(),
            file.display(),
            source.display()
        );
    }
}

/// The modification time and path of the newest file under `dir`.
fn newest_file(dir: &Path) -> (std::time::SystemTime, PathBuf) {
    let mut newest = (std::time::SystemTime::UNIX_EPOCH, dir.to_path_buf());
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.unwrap().path();
        let found = if path.is_dir() {
            newest_file(&path)
        } else {
            let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
            (modified, path)
        };
        if found.0 > newest.0 {
            newest = found;
        }
    }
    newest
}

/// The cache `scripts/llama/build.sh` builds llama.cpp and the tiny model into.
fn llama_cache() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache"))
        .join("capshim/llama.cpp-py0.3.36")
}

/// The real llama-bench and the tiny model, from `CAPSHIM_TEST_LLAMA_BENCH` and
/// `CAPSHIM_TEST_MODEL`, defaulting to `scripts/llama/build.sh`'s cache; panics (never skips)
/// when they are missing.
pub fn real_llama() -> (PathBuf, PathBuf) {
    let bench = std::env::var_os("CAPSHIM_TEST_LLAMA_BENCH")
        .map(PathBuf::from)
        .unwrap_or_else(|| llama_cache().join("bin/llama-bench"));
    let model = std::env::var_os("CAPSHIM_TEST_MODEL")
        .map(PathBuf::from)
        .unwrap_or_else(|| llama_cache().join("models/tiny-llama-q4_k_m.gguf"));
    for (what, path, var) in [
        ("llama-bench", &bench, "CAPSHIM_TEST_LLAMA_BENCH"),
        ("the tiny test model", &model, "CAPSHIM_TEST_MODEL"),
    ] {
        assert!(
            path.is_file(),
            "{what} is missing at {}: run scripts/llama/build.sh first (it builds llama.cpp's \
             llama-bench and the tiny model into the cache), or set {var}",
            path.display()
        );
    }
    (bench, model)
}

/// A file's text; panics naming the file.
pub fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `capshim report BUNDLE` checks the bundle and prints exactly `expected` (its report).
pub fn assert_report_reproduces(bundle: &Path, expected: &str) {
    capshim()
        .arg("report")
        .arg(bundle)
        .assert()
        .success()
        .stdout(expected.to_string());
}

/// `capshim report BUNDLE` refuses a changed bundle: exit code 3, nothing on stdout, and
/// `message` on stderr. Returns the assertion to check more of stderr.
pub fn assert_report_refuses(bundle: &Path, message: &str) -> assert_cmd::assert::Assert {
    capshim()
        .arg("report")
        .arg(bundle)
        .assert()
        .code(3)
        .stdout("")
        .stderr(predicate::str::contains(message))
}

/// Regenerates `dir/SHA256SUMS` the way `sha256sum` would, as someone who edited files of a
/// bundle could.
pub fn reseal(dir: &Path) {
    let status = std::process::Command::new("sh")
        .current_dir(dir)
        .args([
            "-c",
            "find . -type f ! -name SHA256SUMS ! -name SHA256SUMS.sig | sed 's|^./||' | LC_ALL=C sort | xargs sha256sum > SHA256SUMS",
        ])
        .status()
        .unwrap();
    assert!(status.success(), "sha256sum failed in {}", dir.display());
}

/// One llama-bench result in the exact `-o json` field layout (abbreviated to what matters).
pub fn result(model: &str, n_prompt: u64, n_gen: u64, samples: &[f64]) -> serde_json::Value {
    serde_json::json!({
        "build_commit": "a1b2c3d",
        "build_number": 7054,
        "cpu_info": "Apple M1 Ultra",
        "gpu_info": "Apple M1 Ultra",
        "backends": "Metal,BLAS",
        "model_filename": format!("/Users/bench/models/{model}.gguf"),
        "model_type": format!("{model} type"),
        "model_size": 668788096,
        "model_n_params": 1100048384,
        "n_batch": 2048,
        "n_ubatch": 512,
        "n_threads": 8,
        "n_gpu_layers": -1,
        "n_prompt": n_prompt,
        "n_gen": n_gen,
        "n_depth": 0,
        "test_time": "2026-11-30T20:00:00Z",
        "avg_ts": samples.iter().sum::<f64>() / samples.len() as f64,
        "stddev_ts": 0.0,
        "samples_ns": samples.iter().map(|_| 1000).collect::<Vec<_>>(),
        "samples_ts": samples,
    })
}

/// Writes `results` as llama-bench `-o json` (an array) to `dir/name`.
pub fn write_json(dir: &Path, name: &str, results: &[serde_json::Value]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_string_pretty(results).unwrap()).unwrap();
    path
}

/// Writes `results` as llama-bench `-o jsonl` (one object per line) to `dir/name`.
pub fn write_jsonl(dir: &Path, name: &str, results: &[serde_json::Value]) -> PathBuf {
    let path = dir.join(name);
    let text: String = results.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(&path, text).unwrap();
    path
}

/// `n` samples whose median is exactly `median` (odd `n`: `median` itself is the middle one;
/// even `n`: the two middle ones are symmetric around it), spread by about ±1%.
pub fn samples_with_median(median: f64, n: usize) -> Vec<f64> {
    let mut v = Vec::with_capacity(n);
    let half = n / 2;
    for i in 0..half {
        let d = median * 0.002 * (i + 1) as f64;
        v.push(median - d);
        v.push(median + d);
    }
    if n % 2 == 1 {
        v.push(median);
    }
    v
}

/// A stand-in for llama-bench: a shell script that prints `-o json` results for its `-p`/`-n`
/// (`-r` samples each: 100, 101, 99... tokens/s without the shim variables, ten times that with
/// them), ggml-metal device lines on stderr, and, when `FAKE_HOOK=1` and the shim variables are
/// set, the shim's `hooked` line and status event. Each run appends `stock` or `unlocked` (and
/// whether the injection variable was set) to `$FAKE_LOG` when set. `FAKE_FAIL=1` makes it fail;
/// `FAKE_FAIL_ARM=stock` (or `unlocked`) only in runs without (or with) the shim variables.
/// `FAKE_TOUCH=PATH` appends a line to PATH in each run (a model changing under the bench).
/// `FAKE_TRUNCATE=1` stops after the first result, exit 0, its JSON array left open.
/// `FAKE_GARBLE=1` writes the model file name as llama-bench does for `modèle.gguf` (its JSON
/// escapes each byte above 0x7f as a truncated `\uffff` and a stray `f`).
/// With `FAKE_HANG=PATH`, the first run finishes and every later one prints a truncated `[`,
/// writes its pid to `PATH.pid` and waits until SIGTERM, SIGINT or SIGHUP ends it.
pub fn fake_llama_bench(dir: &Path) -> PathBuf {
    let path = dir.join("llama-bench");
    let script = r#"#!/bin/sh
p=512; n=128; r=5; fmt=md
while [ $# -gt 0 ]; do
  case "$1" in
    -p) p=$2; shift ;;
    -n) n=$2; shift ;;
    -r) r=$2; shift ;;
    -o) fmt=$2; shift ;;
  esac
  shift
done
[ -n "$FAKE_TOUCH" ] && echo touched >> "$FAKE_TOUCH"
# FAKE_FILL=DIR: fill DIR's file system first, as a full disk.
[ -n "$FAKE_FILL" ] && cat /dev/zero > "$FAKE_FILL/filler" 2>/dev/null
# FAKE_SWAP=FILE: another file of the same size and times moved into FILE's place, once (a
# second swap could be given the first file's freed inode number back).
if [ -n "$FAKE_SWAP" ] && [ ! -e "$FAKE_SWAP.swapped" ]; then
  : > "$FAKE_SWAP.swapped"
  cp "$FAKE_SWAP" "$FAKE_SWAP.new" && printf X | dd of="$FAKE_SWAP.new" bs=1 count=1 conv=notrunc 2>/dev/null
  touch -r "$FAKE_SWAP" "$FAKE_SWAP.new" && mv "$FAKE_SWAP.new" "$FAKE_SWAP"
fi
model_filename="$MODEL"
[ "$FAKE_GARBLE" = 1 ] && model_filename='/models/mod\ufffff\ufffffle.gguf'
if [ "$FAKE_FAIL" = 1 ]; then echo "error: failed to load model 'x.gguf'" >&2; exit 1; fi
[ "$fmt" = json ] || { echo "fake llama-bench: expected -o json" >&2; exit 1; }
if [ -n "$FAKE_HANG" ]; then
  if [ -e "$FAKE_HANG.first" ]; then
    trap 'exit 143' TERM; trap 'exit 130' INT; trap 'exit 129' HUP
    echo "["
    echo $$ > "$FAKE_HANG.tmp"; mv "$FAKE_HANG.tmp" "$FAKE_HANG.pid"
    while :; do sleep 0.05; done
  fi
  touch "$FAKE_HANG.first"
fi
scale=1; arm=stock
if [ -n "$CAPSHIM_APPLE_FAMILY_MAX" ]; then scale=10; arm=unlocked; fi
[ -n "$FAKE_LOG" ] && echo "$arm inject=${INJECT:-none}" >> "$FAKE_LOG"
if [ "$FAKE_FAIL_ARM" = "$arm" ]; then echo "error: failed to load model in the $arm arm" >&2; exit 1; fi
echo "ggml_metal_device_init: GPU name:   MTL0 (Apple Paravirtual device)" >&2
if [ "$arm" = unlocked ] && [ "$FAKE_HOOK" = 1 ]; then
  echo "capshim: active in llama-bench (pid $$): apple_family_max=$CAPSHIM_APPLE_FAMILY_MAX (Apple9) max_threadgroup_memory=$CAPSHIM_MAX_THREADGROUP_MEMORY recommended_working_set_size=unchanged scope=children" >&2
  echo "capshim: hooked AppleParavirtDevice in llama-bench (pid $$)" >&2
  echo "{\"pid\":$$,\"process\":\"llama-bench\",\"event\":\"active\",\"reason\":null,\"class\":null,\"profile\":{\"apple_family_max\":1009,\"max_threadgroup_memory\":65536,\"recommended_working_set_size\":null}}" >> "$CAPSHIM_STATUS_FILE"
  echo "{\"pid\":$$,\"process\":\"llama-bench\",\"event\":\"hooked\",\"reason\":null,\"class\":\"AppleParavirtDevice\",\"profile\":null}" >> "$CAPSHIM_STATUS_FILE"
  echo "ggml_metal_device_init: GPU family: MTLGPUFamilyApple9  (1009)" >&2
  echo "ggml_metal_device_init: simdgroup reduction   = true" >&2
  echo "ggml_metal_device_init: simdgroup matrix mul. = true" >&2
else
  echo "ggml_metal_device_init: GPU family: MTLGPUFamilyApple5  (1005)" >&2
  echo "ggml_metal_device_init: simdgroup reduction   = false" >&2
  echo "ggml_metal_device_init: simdgroup matrix mul. = false" >&2
fi
samples() {
  i=0; out=""
  while [ $i -lt $r ]; do
    case $((i % 3)) in 0) v=100 ;; 1) v=101 ;; 2) v=99 ;; esac
    out="$out${out:+, }$((v * scale * $1))"
    i=$((i + 1))
  done
  echo "$out"
}
# FAKE_STAMP=1: each process's rows carry its pid as `test_time`, as real llama-bench's rows
# carry their time, so that two processes' files differ.
stamp=""
[ -n "$FAKE_STAMP" ] && stamp="\"test_time\": \"$$\", "
row() {
  echo "  {$stamp\"build_commit\": \"fake123\", \"build_number\": 1, \"backends\": \"Metal\", \"model_filename\": \"$model_filename\", \"model_type\": \"llama 1B Q4_K - Medium\", \"model_size\": 1000, \"model_n_params\": 2000, \"n_prompt\": $1, \"n_gen\": $2, \"n_depth\": 0, \"samples_ts\": [ $(samples $3) ]}"
}
echo "["
row "$p" 0 10
echo ","
[ "$FAKE_TRUNCATE" = 1 ] && exit 0
row 0 "$n" 1
echo "]"
"#
    .replace("${INJECT:-none}", &format!("${{{INJECTION_VAR}:-none}}"))
    .replace("$MODEL", "/models/fake.gguf");
    std::fs::write(&path, script).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    path
}

/// A shim library for unlocked arms that does nothing: the real one next to the `capshim`
/// binary when it is built (on Linux it never hooks, there is no Metal), canonicalized, else an
/// empty shared object compiled here with `cc -shared`.
pub fn inert_shim(dir: &Path) -> PathBuf {
    let real = shim_next_to_capshim();
    if real.is_file() {
        assert_fresh(&real);
        return real.canonicalize().unwrap();
    }
    let src = dir.join("empty.c");
    std::fs::write(&src, "int capshim_test_inert;\n").unwrap();
    let out = dir.join(SHIM_NAME);
    let status = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&out)
        .arg(&src)
        .status()
        .expect("cc is needed to build an inert shared object for the tests");
    assert!(status.success(), "cc -shared failed");
    out
}

/// A file that stands for the model (the fake llama-bench never reads it).
pub fn fake_model(dir: &Path) -> PathBuf {
    let path = dir.join("fake.gguf");
    std::fs::write(&path, b"GGUF fake model").unwrap();
    path
}

/// A small tmpfs mounted at a new folder in `dir` (unmounted when dropped): a file system that
/// really fills up, so a write to it fails with ENOSPC as on a full disk. Mounting needs root
/// (CAP_SYS_ADMIN), as the test machines here run; elsewhere `None`, and the test says it did
/// not run.
pub struct SmallFs {
    /// Where it is mounted.
    pub path: PathBuf,
}

impl SmallFs {
    /// Mounts a tmpfs of `kib` KiB, or `None` (with a note on stderr) when mounting is not
    /// permitted here.
    pub fn mount(dir: &Path, kib: u32) -> Option<SmallFs> {
        let path = dir.join("small-fs");
        std::fs::create_dir(&path).unwrap();
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={kib}k"), "tmpfs"])
            .arg(&path)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !mounted {
            eprintln!("NOT RUN: cannot mount a tmpfs here (needs root) to fill a file system");
            return None;
        }
        Some(SmallFs { path })
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(&self.path)
            .status();
    }
}
