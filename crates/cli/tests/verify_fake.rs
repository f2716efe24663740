//! `capshim verify` against stand-ins for llama.cpp's tools (shell scripts in one folder, given
//! with --llama-dir): Metal kernel results, an unlocked arm that hooks or not, and every failure
//! mode (a missing tool, a crash, output that gives no result, a text too short, a signal),
//! fast and deterministic. `verify_e2e.rs` runs the real tools.
#![cfg(unix)]

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{assert_report_refuses, capshim, fake_model, inert_shim, read};
use predicates::prelude::*;

/// The stand-ins. Each one's behaviour is set by environment variables:
///
/// - llama-perplexity: with `--kl-divergence`, prints the statistics of a comparison (mean KLD
///   `FAKE_KLD`, top-1 `FAKE_TOP` percent, in arms with the shim; zero and 100% without);
///   without, writes a small valid base to the `--kl-divergence-base` file and prints its
///   perplexity. `FAKE_PPL=crash` kills it with SIGSEGV, `garbage` prints nothing it would,
///   `short` logs the too-short text error and exits 0, `hang` (with `FAKE_HANG=PATH`) writes
///   its pid to PATH and waits for a signal.
/// - llama-completion: prints a fixed text, another from `FAKE_GREEDY` in arms with the shim,
///   and llama.cpp's closing `common_perf_print` lines for the `-n` tokens asked;
///   `FAKE_COMPLETION=truncated` leaves the closing lines out, `short` reports 5 tokens,
///   `crash` kills it with SIGSEGV.
/// - test-backend-ops: a build without Metal unless `FAKE_METAL=1`; then every op passes, but
///   one fails in arms with the shim when `FAKE_KERNEL_FAIL=1`.
///
/// Every tool in an arm with the shim writes the shim's `hooked` status event when
/// `FAKE_HOOK=1`; every tool fails (exit 1) in arms with the shim when `FAKE_FAIL_SHIM=1`, in
/// arms without when `FAKE_FAIL_SHIM=0`.
fn fake_tools(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let hook = r#"
if [ -n "$CAPSHIM_APPLE_FAMILY_MAX" ]; then
  shim=1
  echo "capshim: active in $(basename "$0") (pid $$): apple_family_max=$CAPSHIM_APPLE_FAMILY_MAX scope=children" >&2
  echo "{\"pid\":$$,\"process\":\"$(basename "$0")\",\"event\":\"active\",\"reason\":null,\"class\":null,\"profile\":null}" >> "$CAPSHIM_STATUS_FILE"
  if [ "$FAKE_HOOK" = 1 ]; then
    echo "capshim: hooked AppleParavirtDevice in $(basename "$0") (pid $$)" >&2
    echo "{\"pid\":$$,\"process\":\"$(basename "$0")\",\"event\":\"hooked\",\"reason\":null,\"class\":\"AppleParavirtDevice\",\"profile\":null}" >> "$CAPSHIM_STATUS_FILE"
  fi
else
  shim=0
fi
# FAKE_SWAP=FILE: another file of the same size and times moved into FILE's place, once (a
# second swap could be given the first file's freed inode number back).
if [ -n "$FAKE_SWAP" ] && [ ! -e "$FAKE_SWAP.swapped" ]; then
  : > "$FAKE_SWAP.swapped"
  cp "$FAKE_SWAP" "$FAKE_SWAP.new" && printf X | dd of="$FAKE_SWAP.new" bs=1 count=1 conv=notrunc 2>/dev/null
  touch -r "$FAKE_SWAP" "$FAKE_SWAP.new" && mv "$FAKE_SWAP.new" "$FAKE_SWAP"
fi
if [ -n "$FAKE_FAIL_SHIM" ] && [ "$shim" = "$FAKE_FAIL_SHIM" ]; then
  echo "error: failed to load the model (shim=$shim)" >&2; exit 1
fi
"#;
    let perplexity = r#"#!/bin/sh
HOOK
echo "GGML_METAL_BF16_DISABLE=${GGML_METAL_BF16_DISABLE:-unset}" >&2
kl=0; base=""
while [ $# -gt 0 ]; do
  case "$1" in
    --kl-divergence) kl=1 ;;
    --kl-divergence-base) base=$2; shift ;;
  esac
  shift
done
case "$FAKE_PPL" in
  crash) echo "ggml_abort: fake crash" >&2; kill -SEGV $$ ;;
  garbage) echo "this is not llama-perplexity"; exit 0 ;;
  short)
    echo "0.00.332.685 E perplexity: you need at least 1024 tokens to evaluate perplexity with a context of 512" >&2
    echo "0.00.332.686 E perplexity: the data file you provided tokenizes to only 348 tokens" >&2
    exit 0 ;;
  hang)
    trap 'exit 143' TERM; trap 'exit 130' INT; trap 'exit 129' HUP
    echo $$ > "$FAKE_HANG.tmp"; mv "$FAKE_HANG.tmp" "$FAKE_HANG"
    while :; do sleep 0.05; done ;;
esac
if [ $kl = 0 ]; then
  # FAKE_BASE=short: the base cut short, as by a full disk; FAKE_FILL=DIR fills DIR first.
  [ -n "$FAKE_FILL" ] && cat /dev/zero > "$FAKE_FILL/filler" 2>/dev/null
  # ctx 8, vocabulary 2, 1 chunk: 88 bytes.
  printf '_logits_\010\000\000\000\002\000\000\000\001\000\000\000' > "$base"
  [ "$FAKE_BASE" = short ] || head -c 68 /dev/zero >> "$base"
  echo "perplexity: calculating perplexity over 4 chunks, n_ctx=512, batch_size=2048, n_seq=4" >&2
  echo "perplexity: 1.00 seconds per pass - ETA Final estimate: PPL = 10.0000 +/- 0.10000" >&2
  exit 0
fi
kld=0.000000; top=100.000
if [ $shim = 1 ]; then kld=${FAKE_KLD:-0.000000}; top=${FAKE_TOP:-100.000}; fi
echo "kl_divergence: computing over 4 chunks, n_ctx=512, batch_size=2048, n_seq=4" >&2
cat <<EOF
chunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence              Δp RMS            Same top p
====== Perplexity statistics ======
Mean PPL(Q)                   :  10.010000 ±   0.100000
Mean PPL(base)                :  10.000000 ±   0.100000
Mean ln(PPL(Q)/PPL(base))     :   0.001000 ±   0.000100

====== KL divergence statistics ======
Mean    KLD:   $kld ±   0.000001
Maximum KLD:   $kld
99.9%   KLD:   $kld
99.0%   KLD:   $kld
Median  KLD:   $kld
RMS Δp    :  0.100 ± 0.001 %
Same top p: $top ± 0.010 %
EOF
"#
    .replace("HOOK", hook);
    let completion = r#"#!/bin/sh
HOOK
n=128
while [ $# -gt 0 ]; do
  case "$1" in -n) n=$2; shift ;; esac
  shift
done
if [ "$FAKE_COMPLETION" = crash ]; then kill -SEGV $$; fi
if [ $shim = 1 ] && [ -n "$FAKE_GREEDY" ]; then printf '%s' "$FAKE_GREEDY"; else printf 'the same words every time'; fi
[ "$FAKE_COMPLETION" = truncated ] && exit 0
[ "$FAKE_COMPLETION" = short ] && n=5
echo "common_perf_print:    samplers time =       1.00 ms /   $((10 + n)) tokens" >&2
echo "common_perf_print: prompt eval time =       1.00 ms /    10 tokens (    0.10 ms per token)" >&2
echo "common_perf_print:       total time =       2.00 ms /   $((10 + n)) tokens" >&2
"#
    .replace("HOOK", hook);
    let backend_ops = r#"#!/bin/sh
HOOK
printf 'Testing 2 devices\n\n'
if [ "$FAKE_METAL" != 1 ]; then
  printf 'Backend 1/1: CPU\n  Skipping\n1/1 backends passed\n\033[1;32mOK\033[0m\n'
  exit 0
fi
ok='\033[1;32mOK\033[0m'; fail='\033[1;31mFAIL\033[0m'
printf 'Backend 1/2: MTL0\n  Device description: Apple M1 Ultra\n  Device memory: 98304 MB (98303 MB free)\n\n'
printf "  ADD(type=f32,ne=[10,5,4,3]): $ok\n"
printf '  FLASH_ATTN_EXT(hsk=576,type_KV=bf16): not supported [MTL0] \n'
if [ $shim = 1 ] && [ "$FAKE_KERNEL_FAIL" = 1 ]; then
  printf "[MUL_MAT] ERR = 0.012345678 > 0.000500000   MUL_MAT(type_a=bf16,type_b=f32): $fail\n"
  printf '  1/2 tests passed\n\nFailing tests:\n  MUL_MAT(type_a=bf16,type_b=f32)\n'
  printf "  Backend MTL0: $fail\nBackend 2/2: CPU\n  Skipping\n1/2 backends passed\n$fail\n"
  exit 1
fi
printf "  MUL_MAT(type_a=bf16,type_b=f32): $ok\n  2/2 tests passed\n  Backend MTL0: $ok\n"
printf "Backend 2/2: CPU\n  Skipping\n2/2 backends passed\n$ok\n"
"#
    .replace("HOOK", hook);
    for (name, script) in [
        ("llama-perplexity", perplexity),
        ("llama-completion", completion),
        ("test-backend-ops", backend_ops),
    ] {
        let path = bin.join(name);
        std::fs::write(&path, script).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    bin
}

struct Setup {
    tmp: tempfile::TempDir,
    bin: PathBuf,
    model: PathBuf,
    shim: PathBuf,
}

fn setup() -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    Setup {
        bin: fake_tools(tmp.path()),
        model: fake_model(tmp.path()),
        shim: inert_shim(tmp.path()),
        tmp,
    }
}

impl Setup {
    /// `capshim verify -m MODEL --llama-dir BIN --dylib SHIM -o OUT`.
    fn verify(&self, out: &Path) -> assert_cmd::Command {
        self.verify_with(out, &self.model, Some(&self.bin))
    }

    /// As [`Setup::verify`], with another model, and without --llama-dir when `bin` is `None`.
    fn verify_with(&self, out: &Path, model: &Path, bin: Option<&Path>) -> assert_cmd::Command {
        let mut cmd = capshim();
        cmd.current_dir(self.tmp.path())
            .arg("verify")
            .arg("-m")
            .arg(model)
            .arg("--dylib")
            .arg(&self.shim)
            .arg("-o")
            .arg(out);
        if let Some(bin) = bin {
            cmd.arg("--llama-dir").arg(bin);
        }
        for var in [
            "FAKE_HOOK",
            "FAKE_METAL",
            "FAKE_KERNEL_FAIL",
            "FAKE_KLD",
            "FAKE_TOP",
            "FAKE_PPL",
            "FAKE_GREEDY",
            "FAKE_COMPLETION",
            "FAKE_FAIL_SHIM",
            "FAKE_SWAP",
            "FAKE_BASE",
            "FAKE_FILL",
        ] {
            cmd.env_remove(var);
        }
        cmd
    }
}

fn summary(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&read(&dir.join("summary.json"))).unwrap()
}

#[test]
fn an_unlocked_arm_with_metal_kernels_is_equivalent_or_different_with_its_evidence() {
    let s = setup();
    let out = s.tmp.path().join("same");
    let assert = s
        .verify(&out)
        .env("FAKE_HOOK", "1")
        .env("FAKE_METAL", "1")
        .env("FAKE_KLD", "0.000020")
        .env("FAKE_TOP", "99.800")
        .assert()
        .code(0);
    let stdout = String::from_utf8(assert.get_output().stdout.clone()).unwrap();
    let v = summary(&out);
    assert_eq!(v["schema_version"], 6);
    assert_eq!(v["reference"], "stock");
    assert_eq!(v["result"], "equivalent");
    let arm = &v["arms"]["apple9-64k"];
    assert_eq!(arm["verdict"], "equivalent", "{arm}");
    assert_eq!(arm["kld_mean"], 0.00002);
    assert!((arm["top1_agreement"].as_f64().unwrap() - 0.998).abs() < 1e-12);
    assert!((arm["ppl_delta"].as_f64().unwrap() - 0.001).abs() < 1e-12);
    assert!(arm["greedy_first_divergence"].is_null());
    assert_eq!(arm["greedy"], "identical");
    assert_eq!(arm["kernel_tests"]["passed"], 2, "{}", arm["kernel_tests"]);
    assert_eq!(arm["kernel_tests"]["failed"], 0);
    assert_eq!(arm["kernel_tests"]["unsupported"], 1);
    assert_eq!(arm["activation"], "shim active, hooked AppleParavirtDevice");
    assert_eq!(v["arms"]["stock"]["verdict"], "reference");
    assert_eq!(read(&out.join("report.md")), stdout);
    capshim()
        .arg("report")
        .arg(&out)
        .assert()
        .success()
        .stdout(stdout.clone());
    capshim()
        .args(["report", "--json"])
        .arg(&out)
        .assert()
        .success()
        .stdout(read(&out.join("summary.json")));
    // A verify bundle is reported alone, and only as Markdown or JSON.
    for extra in [&["--csv"][..], &["--arm", "x=y.json"][..]] {
        capshim()
            .arg("report")
            .arg(&out)
            .args(extra)
            .assert()
            .code(2)
            .stderr(predicate::str::contains("is a `capshim verify` bundle"));
    }

    // A failing kernel, a greedy text that differs and a large KL divergence: different, each
    // named; the exit code says so.
    let out = s.tmp.path().join("different");
    s.verify(&out)
        .env("FAKE_HOOK", "1")
        .env("FAKE_METAL", "1")
        .env("FAKE_KERNEL_FAIL", "1")
        .env("FAKE_KLD", "0.050000")
        .env("FAKE_GREEDY", "the same wordz")
        .assert()
        .code(5)
        .stdout(predicate::str::contains("| apple9-64k | different |"));
    let v = summary(&out);
    let arm = &v["arms"]["apple9-64k"];
    assert_eq!(v["result"], "different");
    let evidence: Vec<&str> = arm["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    assert_eq!(
        evidence,
        [
            "mean KL divergence 0.050000 > 0.0001 (--max-kld)",
            "99th-percentile KL divergence 0.050000 > 0.001 (--max-kld-p99)",
            "1 kernel test(s) fail that pass in the reference: MUL_MAT(type_a=bf16,type_b=f32)",
        ]
    );
    assert_eq!(
        arm["greedy_first_divergence"],
        serde_json::json!({"unit": "char", "index": 13})
    );
    assert_eq!(arm["kernel_tests"]["failed"], 1);
    // --greedy-must-match counts the greedy text too; looser thresholds pass the KLD.
    let out = s.tmp.path().join("greedy");
    s.verify(&out)
        .env("FAKE_HOOK", "1")
        .env("FAKE_GREEDY", "other words")
        .env("FAKE_KLD", "0.050000")
        .args([
            "--greedy-must-match",
            "--max-kld",
            "0.1",
            "--max-kld-p99",
            "0.1",
        ])
        .assert()
        .code(5);
    assert_eq!(
        summary(&out)["arms"]["apple9-64k"]["evidence"],
        serde_json::json!([
            "greedy text differs from the reference's at character 0 (--greedy-must-match)"
        ])
    );
}

#[test]
fn an_arm_whose_shim_did_not_activate_is_not_run_unless_allowed() {
    let s = setup();
    let out = s.tmp.path().join("inactive");
    s.verify(&out)
        .args(["--arm", "nobf16=apple9-64k,GGML_METAL_BF16_DISABLE=1"])
        .assert()
        .code(1)
        .stdout(predicate::str::contains("| nobf16 | not run"))
        .stderr(predicate::str::contains(
            "not every arm was compared (nobf16 not run",
        ))
        .stderr(predicate::str::contains("--allow-inactive"));
    let v = summary(&out);
    assert_eq!(v["result"], "incomplete");
    let arm = &v["arms"]["nobf16"];
    assert_eq!(arm["verdict"], "not run");
    assert!(
        arm["evidence"][0]
            .as_str()
            .unwrap()
            .starts_with("the shim did not activate in llama-perplexity"),
        "{arm}"
    );
    assert_eq!(arm["env"]["GGML_METAL_BF16_DISABLE"], "1");
    // The arm's own variable reached its process, and only its.
    assert!(read(&out.join("raw/nobf16-perplexity.stderr")).contains("GGML_METAL_BF16_DISABLE=1"));
    assert!(
        read(&out.join("raw/stock-perplexity.stderr")).contains("GGML_METAL_BF16_DISABLE=unset")
    );
    // Its remaining steps never ran; the bundle is sealed and reports again.
    assert!(!out.join("raw/nobf16-greedy.stdout").exists());
    assert!(out.join("SHA256SUMS").is_file());
    let env: serde_json::Value =
        serde_json::from_str(&read(&out.join("environment.json"))).unwrap();
    let step = &env["steps"][3];
    assert_eq!(step["step"], "perplexity");
    assert_eq!(step["env"]["set"]["GGML_METAL_BF16_DISABLE"], "1");
    assert!(
        step["command_line"]
            .as_str()
            .unwrap()
            .contains("--kl-divergence")
    );
    capshim().arg("report").arg(&out).assert().success();

    let out = s.tmp.path().join("allowed");
    s.verify(&out)
        .arg("--allow-inactive")
        .assert()
        .code(0)
        .stdout(predicate::str::contains(
            "compared anyway (--allow-inactive)",
        ));
    assert_eq!(summary(&out)["arms"]["apple9-64k"]["verdict"], "equivalent");

    // Relabelled as an arm without the shim (whose activation is then never read), its
    // processes' record still showing the shim's variables: refused, naming the field.
    let env_path = out.join("environment.json");
    let mut env: serde_json::Value = serde_json::from_str(&read(&env_path)).unwrap();
    let arms = env["verify"]["arms"].as_array_mut().unwrap();
    let arm = arms.iter_mut().find(|a| a["name"] == "apple9-64k").unwrap();
    arm["shim"] = false.into();
    for step in arm["steps"].as_array_mut().unwrap() {
        step["status"] = serde_json::Value::Null;
    }
    std::fs::write(&env_path, serde_json::to_string_pretty(&env).unwrap()).unwrap();
    common::reseal(&out);
    common::assert_report_refuses(
        &out,
        "verify.arms[1] (\"apple9-64k\"): `shim` is false, but `arms` records its profile values",
    );
    // A process's arguments after `--` edited in the manifest alone.
    let mut env: serde_json::Value = serde_json::from_str(&read(&env_path)).unwrap();
    let arm = env["verify"]["arms"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|a| a["name"] == "apple9-64k")
        .unwrap();
    arm["shim"] = true.into();
    env["verify"]["extra_args"] = serde_json::json!(["-ngl", "99"]);
    std::fs::write(&env_path, serde_json::to_string_pretty(&env).unwrap()).unwrap();
    common::reseal(&out);
    common::assert_report_refuses(&out, "did not run with the arm's `args` and `extra_args`");
}

/// `verify --sign` seals through the same code as `bench --sign`: the signature checks.
#[test]
fn a_verify_bundle_can_be_signed_when_sealed() {
    let s = setup();
    let key = s.tmp.path().join("key");
    let made = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&key)
        .status()
        .expect("ssh-keygen (OpenSSH's client)");
    assert!(made.success());
    let allowed = s.tmp.path().join("allowed");
    std::fs::write(
        &allowed,
        format!("me@example.com {}", read(&key.with_extension("pub"))),
    )
    .unwrap();
    let out = s.tmp.path().join("signed");
    s.verify(&out)
        .env("FAKE_HOOK", "1")
        .arg("--sign")
        .arg(&key)
        .assert()
        .code(0);
    assert!(read(&out.join("SHA256SUMS.sig")).starts_with("-----BEGIN SSH SIGNATURE-----"));
    capshim()
        .arg("report")
        .arg("--allowed-signers")
        .arg(&allowed)
        .args(["--identity", "me@example.com"])
        .arg(&out)
        .assert()
        .success()
        .stdout(read(&out.join("report.md")))
        .stderr(predicate::str::contains(
            "Good \"capshim-bundle\" signature",
        ));
}

#[test]
fn another_arm_can_be_the_reference() {
    let s = setup();
    let out = s.tmp.path().join("ref");
    s.verify(&out)
        .env("FAKE_HOOK", "1")
        .args(["--reference", "apple9-64k", "--profile", "apple9-64k"])
        .assert()
        .code(0);
    let v = summary(&out);
    assert_eq!(v["reference"], "apple9-64k");
    assert_eq!(v["arms"]["apple9-64k"]["verdict"], "reference");
    assert_eq!(v["arms"]["stock"]["verdict"], "equivalent");
    let env: serde_json::Value =
        serde_json::from_str(&read(&out.join("environment.json"))).unwrap();
    assert_eq!(
        env["steps"][0]["arm"], "apple9-64k",
        "the reference runs first"
    );
    // A reference whose shim did not activate leaves nothing to compare with.
    s.verify(&s.tmp.path().join("inactive-ref"))
        .args(["--reference", "apple9-64k"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "the reference arm apple9-64k cannot be compared with: the shim did not activate",
        ));
}

#[test]
fn a_base_saved_elsewhere_is_the_reference_of_every_arm() {
    let s = setup();
    // A base into a folder that does not exist, or into the bundle itself: usage errors
    // before anything runs.
    let never = s.tmp.path().join("never");
    s.verify(&never)
        .arg("--save-base")
        .arg(s.tmp.path().join("no-such-folder/host.kld"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("no-such-folder does not exist"));
    s.verify(&never)
        .arg("--save-base")
        .arg(never.join("host.kld"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("is inside the bundle directory"));
    assert!(!never.exists());
    let base = s.tmp.path().join("host.kld");
    s.verify(&s.tmp.path().join("host"))
        .arg("--save-base")
        .arg(&base)
        .assert()
        .code(0)
        .stdout(predicate::str::contains("Result: **reference only**"));
    let sidecar: serde_json::Value =
        serde_json::from_str(&read(&s.tmp.path().join("host.kld.capshim.json"))).unwrap();
    assert_eq!(sidecar["format"], "capshim-verify-base");
    assert_eq!(sidecar["greedy"]["text"], "the same words every time");
    assert_eq!(
        sidecar["header"],
        serde_json::json!({"ctx": 8, "vocab": 2, "chunks": 1})
    );
    let host = summary(&s.tmp.path().join("host"));
    assert_eq!(host["base"]["saved"], true);
    assert_eq!(host["base"]["bytes"], 88);
    // Never overwritten.
    s.verify(&s.tmp.path().join("again"))
        .arg("--save-base")
        .arg(&base)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("host.kld already exists"));

    // The same model in the guest: every arm against the base, greedy text from its
    // description. Another model file: a warning, never an error.
    let out = s.tmp.path().join("guest");
    let other = s.tmp.path().join("other.gguf");
    std::fs::write(&other, "GGUF another model").unwrap();
    s.verify(&out)
        .env("FAKE_HOOK", "1")
        .env("FAKE_GREEDY", "the same words every time")
        .arg("--base")
        .arg(&base)
        .assert()
        .code(0);
    let v = summary(&out);
    assert_eq!(v["reference"], "base");
    assert_eq!(v["arms"]["stock"]["verdict"], "equivalent");
    assert_eq!(v["arms"]["apple9-64k"]["greedy"], "identical");
    assert_eq!(v["warnings"], serde_json::json!([]));
    assert!(out.join("raw/base.capshim.json").is_file());
    assert!(
        !out.join("raw/host.kld").exists(),
        "the base is never copied in"
    );
    s.verify_with(&s.tmp.path().join("other"), &other, Some(&s.bin))
        .env("FAKE_HOOK", "1")
        .arg("--base")
        .arg(&base)
        .assert()
        .code(0)
        .stdout(predicate::str::contains(
            "the base was made from another model file, fake.gguf",
        ));
    // The base fixes the context and the chunks.
    s.verify(&s.tmp.path().join("never"))
        .arg("--base")
        .arg(&base)
        .args(["-c", "256"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "fixes the text, -c (8) and the chunks (1)",
        ));
    // A file that is not a base is refused before anything runs.
    s.verify(&s.tmp.path().join("never"))
        .arg("--base")
        .arg(&s.model)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("is not a base"));
    assert!(!s.tmp.path().join("never").exists());
}

#[test]
fn a_missing_tool_is_named_before_anything_runs() {
    let s = setup();
    std::fs::remove_file(s.bin.join("llama-completion")).unwrap();
    let out = s.tmp.path().join("never");
    s.verify(&out)
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "llama-completion is not in --llama-dir",
        ));
    // Without --llama-dir: PATH, then the setup cache under HOME.
    s.verify_with(&out, &s.model, None)
        .env("PATH", "/nonexistent")
        .env("HOME", s.tmp.path())
        .env_remove("XDG_CACHE_HOME")
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "llama-perplexity was not found on PATH nor in",
        ))
        .stderr(predicate::str::contains("--llama-dir DIR"));
    std::fs::remove_file(s.bin.join("test-backend-ops")).unwrap();
    std::fs::write(s.bin.join("llama-completion"), "").unwrap();
    s.verify(&out)
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "llama-completion is not in --llama-dir",
        ));
    assert!(!out.exists(), "no bundle for refused input");
}

#[test]
fn a_tool_that_crashes_or_prints_no_result_leaves_an_unsealed_bundle() {
    let s = setup();
    for (mode, says) in [
        (
            "crash",
            "llama-perplexity failed in arm stock (signal: 11 (SIGSEGV)",
        ),
        ("garbage", "its output has no `Final estimate: PPL =` line"),
        (
            "short",
            "the text is too short: llama-perplexity needs at least 1024 tokens for a context of 512 and the text has 348",
        ),
    ] {
        let out = s.tmp.path().join(mode);
        s.verify(&out)
            .env("FAKE_PPL", mode)
            .assert()
            .code(1)
            .stdout("")
            .stderr(predicate::str::contains(says))
            .stderr(predicate::str::contains(
                "the raw files written so far are in",
            ));
        assert!(!out.join("SHA256SUMS").exists(), "{mode}: never sealed");
        assert!(!out.join("summary.json").exists(), "{mode}");
        let note = read(&out.join("INCOMPLETE"));
        assert!(
            note.contains("the `capshim verify` run that wrote it stopped"),
            "{note}"
        );
        // The tool ran to its end: its output is not partial, only without a result.
        assert!(
            note.contains("Step that ended but was not accepted") && !note.contains("partial"),
            "{mode}: {note}"
        );
        assert_report_refuses(&out, "did not finish");
    }
    // A base being saved is removed when the reference's steps fail after writing it: no
    // half-described base is left to compare with.
    let base = s.tmp.path().join("half.kld");
    let out = s.tmp.path().join("half");
    s.verify(&out)
        .env("FAKE_COMPLETION", "crash")
        .arg("--save-base")
        .arg(&base)
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "llama-completion failed in arm stock",
        ));
    assert!(!base.exists() && !s.tmp.path().join("half.kld.capshim.json").exists());
    assert!(
        read(&out.join("INCOMPLETE")).contains("half.kld, was incomplete and has been removed")
    );
    // The ggml abort message is in the error.
    s.verify(&s.tmp.path().join("crash2"))
        .env("FAKE_PPL", "crash")
        .assert()
        .stderr(predicate::str::contains("ggml_abort: fake crash"));
}

#[test]
fn a_signal_stops_the_run_and_leaves_an_unsealed_bundle() {
    let s = setup();
    for (signal, code) in [
        (nix::sys::signal::Signal::SIGTERM, 143),
        (nix::sys::signal::Signal::SIGINT, 130),
    ] {
        let out = s.tmp.path().join(format!("{signal}"));
        let pid_file = s.tmp.path().join(format!("{signal}.pid"));
        let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("capshim"));
        cmd.current_dir(s.tmp.path())
            .args(["verify", "-m"])
            .arg(&s.model)
            .arg("--llama-dir")
            .arg(&s.bin)
            .args(["--profile", "again=stock", "-o"])
            .arg(&out)
            .env("FAKE_PPL", "hang")
            .env("FAKE_HANG", &pid_file)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        let child = cmd.spawn().unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while !pid_file.exists() {
            assert!(Instant::now() < deadline, "the fake tool never started");
            std::thread::sleep(Duration::from_millis(20));
        }
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), signal).unwrap();
        let output = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(code), "{stderr}");
        assert!(
            stderr.contains(&format!("interrupted by {signal}")),
            "{stderr}"
        );
        assert!(!out.join("SHA256SUMS").exists());
        let note = read(&out.join("INCOMPLETE"));
        assert!(note.contains(&format!("interrupted by {signal}")), "{note}");
        assert!(note.contains("Steps finished (0 of 6)"), "{note}");
        assert_report_refuses(&out, "did not finish");
    }
}

#[test]
fn usage_errors_exit_2_before_anything_runs() {
    let s = setup();
    let out = s.tmp.path().join("never");
    for (args, says) in [
        (
            &["--reference", "nope"][..],
            "--reference \"nope\" names no arm; the arms are: stock, apple9-64k",
        ),
        (&["--profile", "stock"][..], "--profile stock-2=stock"),
        (
            &["--arm", "base=stock"][..],
            "the label \"base\" is reserved",
        ),
        (
            &["--profile", "host=apple9-64k"][..],
            "the label \"host\" is reserved",
        ),
        (
            &["--min-top1", "99"][..],
            "--min-top1 99 must be a fraction from 0 to 1",
        ),
        (&["--", "-c", "256"][..], "\"-c\" after `--` is refused"),
        // A download would replace the model capshim hashed.
        (
            &["--", "-hf", "user/model"][..],
            "\"-hf\" after `--` is refused",
        ),
        (
            &["--arm", "x=stock,common-args=-mu http://x/m.gguf"][..],
            "the llama.cpp option \"-mu\" is refused",
        ),
        (
            &[
                "--arm",
                "cpu=stock,LLAMA_ARG_N_GPU_LAYERS=0",
                "--",
                "-ngl",
                "99",
            ][..],
            "the llama.cpp option \"-ngl\" after `--` overrides LLAMA_ARG_N_GPU_LAYERS that arm cpu sets",
        ),
        (
            &[
                "--arm",
                "cpu=stock,LLAMA_ARG_N_GPU_LAYERS=0",
                "--",
                "--gpu-layers=99",
            ][..],
            "option \"--gpu-layers=99\" after `--` overrides LLAMA_ARG_N_GPU_LAYERS that arm cpu",
        ),
        (
            &[
                "--arm",
                "g=apple9-64k,LLAMA_ARG_N_GPU_LAYERS=9",
                "--",
                "--n-gpu-layers",
                "1",
            ][..],
            "arm g sets",
        ),
        (
            &["--base", "x.kld", "--save-base", "y.kld"][..],
            "cannot be used with",
        ),
        (
            &["--base", "x.kld", "--reference", "stock"][..],
            "cannot be used with",
        ),
    ] {
        s.verify(&out)
            .args(args)
            .assert()
            .code(2)
            .stderr(predicate::str::contains(says));
    }
    assert!(!out.exists());
    capshim()
        .args(["verify", "--help"])
        .assert()
        .success()
        .stdout(predicate::str::contains("Examples:\n"))
        .stdout(predicate::str::contains("Exit codes:\n"))
        .stdout(predicate::str::contains("capshim verify"));
}

/// A verify bundle whose result was forged to `equivalent` and relabelled (its `kind` or
/// `schema_version` edited), SHA256SUMS written again, is refused by `report` (exit 3) and by
/// `sign`; `--as-written` shows it marked UNVERIFIED on stdout's first line, exit 4.
#[test]
fn a_relabelled_verify_bundle_is_refused_by_report_and_sign() {
    let s = setup();
    let key = s.tmp.path().join("key");
    let made = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&key)
        .status()
        .expect("ssh-keygen (OpenSSH's client)");
    assert!(made.success());
    let base = s.tmp.path().join("base");
    s.verify(&base)
        .env("FAKE_HOOK", "1")
        .env("FAKE_KLD", "0.5")
        .assert()
        .code(5);
    let env = read(&base.join("environment.json"));
    let report = read(&base.join("report.md"));
    let summary = read(&base.join("summary.json"));
    assert!(report.contains("Result: **different**"), "{report}");
    let forged_report = report.replace("Result: **different**", "Result: **equivalent**");
    let forged_summary = summary.replace("\"different\"", "\"equivalent\"");
    for (name, from, to, says) in [
        (
            "v2",
            "\"schema_version\": 6,",
            "\"schema_version\": 2,",
            "environment.json: schema_version 2: this capshim never wrote a verify bundle",
        ),
        (
            "v99",
            "\"schema_version\": 6,",
            "\"schema_version\": 99,",
            "environment.json: schema_version 99",
        ),
        (
            "kind",
            "\"kind\": \"verify\"",
            "\"kind\": \"verify2\"",
            "environment.json: kind verify2",
        ),
    ] {
        let out = s.tmp.path().join(name);
        let copied = std::process::Command::new("cp")
            .arg("-a")
            .arg(&base)
            .arg(&out)
            .status();
        assert!(copied.unwrap().success());
        assert!(env.contains(from), "{env}");
        std::fs::write(out.join("environment.json"), env.replace(from, to)).unwrap();
        std::fs::write(out.join("report.md"), &forged_report).unwrap();
        std::fs::write(out.join("summary.json"), &forged_summary).unwrap();
        common::reseal(&out);
        capshim()
            .arg("report")
            .arg(&out)
            .assert()
            .code(3)
            .stdout("")
            .stderr(predicate::str::contains(says));
        capshim()
            .arg("sign")
            .arg(&out)
            .arg("--key")
            .arg(&key)
            .assert()
            .code(3)
            .stderr(predicate::str::contains(says));
        assert!(!out.join("SHA256SUMS.sig").exists());
        let shown = capshim()
            .args(["report", "--as-written"])
            .arg(&out)
            .assert()
            .code(4)
            .stderr(predicate::str::contains("UNVERIFIED"));
        let stdout = String::from_utf8_lossy(&shown.get_output().stdout).into_owned();
        let (first, rest) = stdout.split_once('\n').unwrap();
        assert!(first.starts_with("UNVERIFIED: "), "{first}");
        assert!(first.contains(says), "{first}");
        assert_eq!(rest, forged_report);
    }
    // Forged without a relabel: derived again and refused.
    std::fs::write(base.join("report.md"), &forged_report).unwrap();
    common::reseal(&base);
    assert_report_refuses(&base, "report.md does not match the raw data");
}

/// `--keep-going`: an arm whose every tool fails is recorded as failed (verdict `not run`,
/// naming each failed step), the bundle is sealed and passes `report`, and verify exits 1
/// (not every arm was compared).
#[test]
fn keep_going_records_an_arm_whose_tools_fail() {
    let s = setup();
    let out = s.tmp.path().join("kept");
    let run = s
        .verify(&out)
        .env("FAKE_HOOK", "1")
        .env("FAKE_FAIL_SHIM", "1")
        .arg("--keep-going")
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "recorded as failed, going on (--keep-going)",
        ));
    let stdout = String::from_utf8_lossy(&run.get_output().stdout).into_owned();
    assert!(out.join("SHA256SUMS").is_file() && !out.join("INCOMPLETE").exists());
    assert_eq!(stdout, read(&out.join("report.md")));
    let v = summary(&out);
    assert_eq!(v["schema_version"], 6);
    assert_eq!(v["result"], "incomplete");
    let arm = &v["arms"]["apple9-64k"];
    assert_eq!(arm["verdict"], "not run", "{arm}");
    let evidence = arm["evidence"].to_string();
    assert!(
        evidence.contains("its llama-perplexity failed (exit status: 1)")
            && evidence.contains("its llama-completion failed (exit status: 1)"),
        "{evidence}"
    );
    assert_eq!(v["arms"]["stock"]["verdict"], "reference");
    capshim()
        .arg("report")
        .arg(&out)
        .assert()
        .success()
        .stdout(stdout);
    // Without --keep-going the first failure stops it, as before.
    let stopped = s.tmp.path().join("stopped");
    s.verify(&stopped)
        .env("FAKE_HOOK", "1")
        .env("FAKE_FAIL_SHIM", "1")
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "llama-perplexity failed in arm apple9-64k",
        ));
    assert!(stopped.join("INCOMPLETE").is_file());
}

/// `--keep-going` with a reference arm that fails: nothing can be compared, no other arm runs,
/// the report says so, the bundle is sealed, and verify exits 1.
#[test]
fn keep_going_with_a_failed_reference_compares_nothing_and_exits_1() {
    let s = setup();
    let out = s.tmp.path().join("no-reference");
    let run = s
        .verify(&out)
        .env("FAKE_HOOK", "1")
        .env("FAKE_FAIL_SHIM", "0")
        .arg("--keep-going")
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "the reference arm stock failed: nothing was compared",
        ));
    let stdout = String::from_utf8_lossy(&run.get_output().stdout).into_owned();
    assert!(out.join("SHA256SUMS").is_file());
    assert!(
        stdout.contains(
            "the reference arm stock failed (its llama-perplexity failed (exit status: 1)"
        ),
        "{stdout}"
    );
    let v = summary(&out);
    assert_eq!(v["result"], "incomplete");
    assert!(v["arms"].get("apple9-64k").is_none(), "{}", v["arms"]);
    assert!(!out.join("raw/apple9-64k-perplexity.stdout").exists());
    capshim()
        .arg("report")
        .arg(&out)
        .assert()
        .success()
        .stdout(stdout);
}

/// A closed or full stderr does not stop verify (issue 15, item 3): it seals its bundle, which
/// report accepts, and exits as it would have.
#[test]
fn a_closed_or_full_stderr_does_not_stop_verify() {
    let s = setup();
    for (name, stderr) in [
        (
            "full",
            std::process::Stdio::from(
                std::fs::OpenOptions::new()
                    .write(true)
                    .open("/dev/full")
                    .unwrap(),
            ),
        ),
        ("closed", {
            let (reader, writer) = std::io::pipe().unwrap();
            drop(reader);
            std::process::Stdio::from(writer)
        }),
    ] {
        let out = s.tmp.path().join(name);
        let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("capshim"));
        for (var, _) in std::env::vars_os() {
            let var = var.to_string_lossy().into_owned();
            if var.starts_with("CAPSHIM_")
                || var.starts_with("LUME_METAL_")
                || var.starts_with("FAKE_")
            {
                cmd.env_remove(var);
            }
        }
        let status = cmd
            .current_dir(s.tmp.path())
            .arg("verify")
            .arg("-m")
            .arg(&s.model)
            .arg("--dylib")
            .arg(&s.shim)
            .arg("--llama-dir")
            .arg(&s.bin)
            .arg("-o")
            .arg(&out)
            .env("FAKE_HOOK", "1")
            .stdout(std::process::Stdio::null())
            .stderr(stderr)
            .status()
            .unwrap();
        assert_eq!(status.code(), Some(0), "{name}");
        assert!(out.join("SHA256SUMS").is_file(), "{name}");
        capshim().arg("report").arg(&out).assert().success();
    }
}

/// A llama-completion or llama-perplexity run that exits 0 with its output cut short (no
/// closing lines, or fewer tokens than asked) is a failed run with that reason (issue 15, item
/// 6), never a result: it stops verify, or with --keep-going is recorded as failed.
#[test]
fn truncated_tool_output_is_a_failed_run() {
    let s = setup();
    for (mode, says) in [
        (
            "truncated",
            "llama-completion failed in arm stock (its output lacks llama.cpp's closing lines",
        ),
        (
            "short",
            "llama-completion failed in arm stock (it generated 5 of the 128 tokens asked (-n 128)",
        ),
    ] {
        let out = s.tmp.path().join(mode);
        s.verify(&out)
            .env("FAKE_COMPLETION", mode)
            .assert()
            .code(1)
            .stderr(predicate::str::contains(says));
        assert!(out.join("INCOMPLETE").is_file() && !out.join("SHA256SUMS").exists());
    }
    let out = s.tmp.path().join("kept");
    s.verify(&out)
        .env("FAKE_HOOK", "1")
        .env("FAKE_COMPLETION", "truncated")
        .arg("--keep-going")
        .assert()
        .code(1)
        .stderr(predicate::str::contains("recorded as failed"));
    let v = summary(&out);
    assert_eq!(v["result"], "incomplete");
    assert!(
        v["arms"]["stock"]["evidence"]
            .to_string()
            .contains("its llama-completion failed (its output lacks llama.cpp's closing lines"),
        "{}",
        v["arms"]["stock"]
    );
}

/// verify keeps the user's other preloaded libraries in every arm, as bench and `run` do: the
/// stock arm gets them alone, an arm with the shim gets them with the shim (it dropped them all
/// before, from the names of the variables alone).
#[cfg(target_os = "linux")]
#[test]
fn verify_keeps_the_users_other_preloaded_libraries() {
    let s = setup();
    let src = s.tmp.path().join("other.c");
    std::fs::write(&src, "int capshim_test_other;\n").unwrap();
    let other = s.tmp.path().join("libother.so");
    let built = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&other)
        .arg(&src)
        .status()
        .unwrap();
    assert!(built.success());
    let out = s.tmp.path().join("out");
    s.verify(&out)
        .env("FAKE_HOOK", "1")
        .env("LD_PRELOAD", &other)
        .assert()
        .success();
    let env: serde_json::Value =
        serde_json::from_str(&read(&out.join("environment.json"))).unwrap();
    let other = other.display().to_string();
    let shim = s.shim.display().to_string();
    let steps = env["steps"].as_array().unwrap();
    assert!(!steps.is_empty());
    for step in steps {
        let preload = step["env"]["set"]["LD_PRELOAD"].as_str().unwrap_or("");
        // Where the shim goes among them is the platform's rule (launch::environment).
        let mut libraries: Vec<&str> = preload.split(':').collect();
        libraries.sort();
        let mut expected: Vec<&str> = if step["arm"] == "stock" {
            vec![&other]
        } else {
            vec![&shim, &other]
        };
        expected.sort();
        assert_eq!(libraries, expected, "{step}");
    }
}

/// An input that is there but is not a text says so: `/dev/null` is a device, an empty file is
/// empty; only a missing one "does not exist" (they all said that before).
#[test]
fn a_text_that_is_a_device_or_empty_is_named_as_such() {
    let s = setup();
    let out = s.tmp.path().join("never");
    let empty = s.tmp.path().join("empty.txt");
    std::fs::write(&empty, "").unwrap();
    let missing = s.tmp.path().join("missing.txt");
    for (text, says) in [
        (
            Path::new("/dev/null"),
            "text /dev/null is not a regular file (it is a device); give a plain-text file with --text".to_string(),
        ),
        (s.tmp.path(), format!("text {} is not a regular file (it is a directory)", s.tmp.path().display())),
        (&empty, format!("text {} is empty", empty.display())),
        (&missing, format!("text {} does not exist", missing.display())),
    ] {
        s.verify(&out)
            .arg("--text")
            .arg(text)
            .assert()
            .code(1)
            .stderr(predicate::str::contains(says));
    }
    assert!(!out.exists());
}

/// A model or text swapped during the steps for another file of the same size and modification
/// time is named after the last step, and the bundle is not sealed: its recorded SHA-256 would
/// not be of the file every step used (verify did not check the files after its steps at all).
#[test]
fn a_model_or_text_swapped_during_the_steps_is_named_and_the_bundle_left_unsealed() {
    let s = setup();
    let text = s.tmp.path().join("text.txt");
    std::fs::write(
        &text,
        "some words to read, enough of them for the fake tools\n",
    )
    .unwrap();
    for (name, swapped) in [("model", &s.model), ("text", &text)] {
        let out = s.tmp.path().join(name);
        s.verify(&out)
            .arg("--text")
            .arg(&text)
            .env("FAKE_HOOK", "1")
            .env("FAKE_SWAP", swapped)
            .assert()
            .code(1)
            .stderr(predicate::str::contains(format!(
                "{} changed while capshim used it: it is another file now",
                swapped.canonicalize().unwrap().display()
            )));
        assert!(out.join("INCOMPLETE").is_file() && !out.join("SHA256SUMS").exists());
    }
}

/// The reference's base is checked when it is written: one cut short is the reference step's
/// failure, not the next arm's ("failed reading log-probs for chunk 0" blamed arm `again`).
#[test]
fn a_base_cut_short_is_the_reference_steps_failure() {
    let s = setup();
    let out = s.tmp.path().join("short");
    let assert = s
        .verify(&out)
        .env("FAKE_HOOK", "1")
        .env("FAKE_BASE", "short")
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "llama-perplexity failed in arm stock (the base it saved, ",
        ))
        .stderr(predicate::str::contains(
            "has 20 of the 88 bytes its header needs: it was cut short",
        ));
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(!stderr.contains("in arm apple9-64k"), "{stderr}");
    assert!(out.join("INCOMPLETE").is_file() && !out.join("SHA256SUMS").exists());
}

/// A full TMPDIR while the reference writes the base: "no space left on device" with the
/// base's path, blamed on the reference's step. The file system is a small tmpfs really filled
/// (ENOSPC), which needs root to mount; elsewhere the test says it did not run.
#[test]
fn a_full_tmpdir_under_the_base_is_named_as_a_full_disk() {
    let s = setup();
    let Some(small) = common::SmallFs::mount(s.tmp.path(), 1024) else {
        return;
    };
    let out = s.tmp.path().join("full");
    s.verify(&out)
        .env("FAKE_HOOK", "1")
        .env("TMPDIR", &small.path)
        .env("FAKE_FILL", &small.path)
        .assert()
        .code(1)
        .stderr(predicate::str::contains(format!(
            "llama-perplexity failed in arm stock (no space left on device: {}/capshim-verify-",
            small.path.display()
        )))
        .stderr(predicate::str::contains("base.kld may be cut short"));
    assert!(out.join("INCOMPLETE").is_file() && !out.join("SHA256SUMS").exists());
}

/// An arm's `common-args` reach its llama-perplexity and llama-completion, not
/// test-backend-ops nor any other arm; its `bench-args` are llama-bench's and reach none.
#[test]
fn an_arms_common_args_reach_its_common_tools_only() {
    let s = setup();
    let out = s.tmp.path().join("args");
    s.verify(&out)
        .args([
            "--allow-inactive",
            "--arm",
            "fa=apple9-64k,common-args=-fa on,bench-args=-fa 1",
            "--",
            "-t",
            "2",
        ])
        .assert()
        .success();
    let env: serde_json::Value =
        serde_json::from_str(&read(&out.join("environment.json"))).unwrap();
    assert_eq!(
        env["arms"][1]["args"]["common"],
        serde_json::json!(["-fa", "on"])
    );
    let steps = env["steps"].as_array().unwrap();
    let mut common = 0;
    for step in steps {
        let argv: Vec<&str> = step["argv"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        let has = argv.windows(2).any(|w| w == ["-fa", "on"]);
        let is_common = step["step"] != "kernels";
        assert_eq!(has, step["arm"] == "fa" && is_common, "{argv:?}");
        assert!(!argv.windows(2).any(|w| w == ["-fa", "1"]), "{argv:?}");
        if has {
            common += 1;
            assert!(argv.ends_with(&["-t", "2", "-fa", "on"]), "{argv:?}");
        }
    }
    assert_eq!(common, 2, "llama-perplexity and llama-completion");
    // Shown with the arm in the derived files, which report derives again.
    assert_eq!(
        summary(&out)["arms"]["fa"]["args"],
        serde_json::json!(["-fa", "on"])
    );
    assert!(summary(&out)["arms"]["stock"].get("args").is_none());
    assert!(read(&out.join("report.md")).contains("common-args: -fa on"));
    // So are the arguments after `--`, which every arm ran with.
    assert_eq!(summary(&out)["extra_args"], serde_json::json!(["-t", "2"]));
    assert!(
        read(&out.join("report.md"))
            .contains("Every arm's llama-perplexity and llama-completion ran with: `-t 2`.")
    );
    capshim().arg("report").arg(&out).assert().success();
    s.verify(&s.tmp.path().join("never"))
        .args(["--arm", "x=apple9-64k,common-args=-c 64"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "arm \"x\": common-args: the llama.cpp option \"-c\" is refused",
        ));
}
