//! `capshim tune` end to end against stand-ins for llama.cpp's tools (shell scripts in one
//! folder): a planted faster setting found, verified and recommended; no winner among equal
//! settings; the bundles checked by `capshim report`, and a relabelled one refused.
//! `llama_e2e.rs` runs tune against the real CPU llama.cpp.
#![cfg(unix)]

mod common;

use std::path::{Path, PathBuf};

use common::{assert_report_refuses, capshim, fake_model, inert_shim, read};
use predicates::prelude::PredicateBooleanExt;

/// The stand-ins, in `dir/bin`:
///
/// - llama-bench: `-o json` results for `-p` and `-n` with `-r` samples each, about 1000 and 100
///   tokens/s with a noise of ±1% drawn from its pid; `FAKE_FAST=WORDS` makes the runs whose
///   arguments contain WORDS (e.g. `-fa 1`) 25% faster; `FAKE_SLEEP=SECONDS` makes each run
///   take that long; `FAKE_FAIL=WORDS` makes the runs whose arguments contain WORDS fail.
/// - llama-perplexity: writes a small base, or prints a comparison whose mean KLD is
///   `FAKE_KLD` (0 by default) in runs whose arguments contain `FAKE_KLD_ARGS`.
/// - llama-completion: a fixed text and llama.cpp's closing lines.
///
/// There is no test-backend-ops: tune runs verify with `--no-kernel-tests`.
fn fake_tools(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let bench = r#"#!/bin/sh
all=" $* "
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
[ "$fmt" = json ] || { echo "fake llama-bench: expected -o json" >&2; exit 1; }
[ -n "$FAKE_SLEEP" ] && sleep "$FAKE_SLEEP"
case "$all" in *" $FAKE_FAIL "*) [ -n "$FAKE_FAIL" ] && { echo "fake llama-bench: planted failure" >&2; exit 1; } ;; esac
speed=1000
case "$all" in *" $FAKE_FAST "*) [ -n "$FAKE_FAST" ] && speed=1250 ;; esac
noise=$(( ($$ * 7919) % 21 - 10 ))
samples() {
  i=0; out=""
  while [ $i -lt $r ]; do
    out="$out${out:+, }$(( $1 * speed * (1000 + noise) / 1000000 )).$i"
    i=$((i + 1))
  done
  echo "$out"
}
row() {
  echo "  {\"build_commit\": \"fake123\", \"build_number\": 1, \"backends\": \"CPU\", \"model_filename\": \"/models/fake.gguf\", \"model_type\": \"llama 1B Q4_K - Medium\", \"model_size\": 1000, \"model_n_params\": 2000, \"n_prompt\": $1, \"n_gen\": $2, \"n_depth\": 0, \"samples_ts\": [ $(samples $3) ]}"
}
echo "["
row "$p" 0 1000
echo ","
row 0 "$n" 100
echo "]"
"#;
    let perplexity = r#"#!/bin/sh
all=" $* "
kl=0; base=""
while [ $# -gt 0 ]; do
  case "$1" in
    --kl-divergence) kl=1 ;;
    --kl-divergence-base) base=$2; shift ;;
  esac
  shift
done
if [ $kl = 0 ]; then
  printf '_logits_\010\000\000\000\002\000\000\000\001\000\000\000' > "$base"
  head -c 68 /dev/zero >> "$base"
  echo "perplexity: calculating perplexity over 4 chunks, n_ctx=512, batch_size=2048, n_seq=4" >&2
  echo "perplexity: 1.00 seconds per pass - ETA Final estimate: PPL = 10.0000 +/- 0.10000" >&2
  exit 0
fi
kld=0.000000
case "$all" in *" $FAKE_KLD_ARGS "*) [ -n "$FAKE_KLD_ARGS" ] && kld=${FAKE_KLD:-0.000000} ;; esac
echo "kl_divergence: computing over 4 chunks, n_ctx=512, batch_size=2048, n_seq=4" >&2
cat <<EOF
====== Perplexity statistics ======
Mean PPL(Q)                   :  10.000000 ±   0.100000
Mean PPL(base)                :  10.000000 ±   0.100000
Mean ln(PPL(Q)/PPL(base))     :   0.000000 ±   0.000100

====== KL divergence statistics ======
Mean    KLD:   $kld ±   0.000001
Maximum KLD:   $kld
99.9%   KLD:   $kld
99.0%   KLD:   $kld
Median  KLD:   $kld
RMS Δp    :  0.100 ± 0.001 %
Same top p: 100.000 ± 0.010 %
EOF
"#;
    let completion = r#"#!/bin/sh
n=128
while [ $# -gt 0 ]; do
  case "$1" in -n) n=$2; shift ;; esac
  shift
done
printf 'the same words every time'
echo "common_perf_print:    samplers time =       1.00 ms /   $((10 + n)) tokens" >&2
echo "common_perf_print: prompt eval time =       1.00 ms /    10 tokens (    0.10 ms per token)" >&2
echo "common_perf_print:       total time =       2.00 ms /   $((10 + n)) tokens" >&2
"#;
    for (name, script) in [
        ("llama-bench", bench),
        ("llama-perplexity", perplexity),
        ("llama-completion", completion),
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
    let bin = fake_tools(tmp.path());
    let model = fake_model(tmp.path());
    let shim = inert_shim(tmp.path());
    Setup {
        tmp,
        bin,
        model,
        shim,
    }
}

impl Setup {
    /// `capshim tune` with the stand-ins, a budget of `budget`, into `out`.
    fn tune(&self, out: &Path, budget: &str) -> assert_cmd::Command {
        self.tune_from(out, budget, "apple9-64k")
    }

    /// `capshim tune` as [`Setup::tune`], against the reference `reference`.
    fn tune_from(&self, out: &Path, budget: &str, reference: &str) -> assert_cmd::Command {
        let mut cmd = capshim();
        cmd.current_dir(self.tmp.path())
            .arg("tune")
            .arg("-m")
            .arg(&self.model)
            .arg("--llama-dir")
            .arg(&self.bin)
            .arg("--dylib")
            .arg(&self.shim)
            .args([
                "--allow-inactive",
                "--reference",
                reference,
                "--budget",
                budget,
            ])
            .arg("-o")
            .arg(out);
        cmd
    }
}

/// Regenerates `dir/SHA256SUMS` as someone who edited files of the bundle could: every file,
/// the verify bundles' own SHA256SUMS included (only the top one is left out, as capshim does).
fn reseal(dir: &Path) {
    let status = std::process::Command::new("sh")
        .current_dir(dir)
        .args([
            "-c",
            "find . -type f ! -path ./SHA256SUMS ! -path ./SHA256SUMS.sig | sed 's|^./||' | LC_ALL=C sort | xargs sha256sum > SHA256SUMS",
        ])
        .status()
        .unwrap();
    assert!(status.success(), "sha256sum failed in {}", dir.display());
}

fn summary(out: &Path) -> serde_json::Value {
    serde_json::from_str(&read(&out.join("summary.json"))).unwrap()
}

/// Whether the candidate `c` (of summary.json) has a setting applied by the arm item `item`.
fn has_item(c: &serde_json::Value, item: &str) -> bool {
    c["settings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["arm_items"].as_array().unwrap().iter().any(|i| i == item))
}

/// The candidate labelled `label`.
fn candidate<'a>(summary: &'a serde_json::Value, label: &str) -> &'a serde_json::Value {
    summary["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["label"] == label)
        .unwrap_or_else(|| panic!("no candidate {label}: {summary:#}"))
}

#[test]
fn a_planted_faster_setting_wins_is_verified_and_recommended() {
    let s = setup();
    let out = s.tmp.path().join("tuned");
    let assert = s
        .tune(&out, "8s")
        .env("FAKE_FAST", "-fa 1")
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    let sum = summary(&out);
    assert_eq!(sum["kind"], "tune");
    // The winner is flash attention on, alone or combined with other knobs (which change
    // nothing here).
    let label = sum["winner"].as_str().unwrap_or_else(|| panic!("{sum:#}"));
    let fast = candidate(&sum, label);
    assert!(has_item(fast, "bench-args=-fa 1"), "{sum:#}");
    assert!(fast["interval_low"].as_f64().unwrap() > 1.02, "{fast:#}");
    assert!(sum["candidates"].as_array().unwrap().len() >= 4, "{sum:#}");
    assert_eq!(sum["verify"]["verdict"], "equivalent");
    let verify_dir = out.join(sum["verify"]["bundle"].as_str().unwrap());
    assert!(verify_dir.join("SHA256SUMS").is_file());
    // The recommendation is a profile file with the winner's arguments.
    let profile = read(&out.join("recommended.toml"));
    let bench = profile
        .lines()
        .find(|l| l.starts_with("bench = ["))
        .unwrap_or_else(|| panic!("{profile}"));
    assert!(bench.contains("\"-fa\", \"1\""), "{profile}");
    assert!(
        stdout.contains(&format!("**Winner: `{label}`**")),
        "{stdout}"
    );
    // report checks the bundle (and the verify bundle in it) and derives the same report.
    common::assert_report_reproduces(&out, &read(&out.join("report.md")));
    // The recommendation is derived: an edit under a new SHA256SUMS is found.
    std::fs::write(
        out.join("recommended.toml"),
        profile.replace("\"1\"", "\"0\""),
    )
    .unwrap();
    reseal(&out);
    assert_report_refuses(&out, "recommended.toml");
    std::fs::write(out.join("recommended.toml"), &profile).unwrap();
    reseal(&out);
    common::assert_report_reproduces(&out, &read(&out.join("report.md")));
    forged_tune_bundles_are_refused(&out, label, &verify_dir);
}

/// Edits of a sealed tune bundle with a winner `label` (verified in `verify_dir`), each under a
/// regenerated SHA256SUMS, that report refuses (exit code 3) naming what disagrees; `sign`
/// refuses them too. Each is undone before the next.
fn forged_tune_bundles_are_refused(out: &Path, label: &str, verify_dir: &Path) {
    let env_path = out.join("environment.json");
    let original = read(&env_path);
    let refused = |message: &str| {
        reseal(out);
        assert_report_refuses(out, message);
        std::fs::write(&env_path, &original).unwrap();
    };
    // The winner's verify bundle unsealed, its summary edited: checked all the same.
    let (inner_sums, inner_summary) = (
        verify_dir.join("SHA256SUMS"),
        verify_dir.join("summary.json"),
    );
    let (sums_text, summary_text) = (read(&inner_sums), read(&inner_summary));
    std::fs::remove_file(&inner_sums).unwrap();
    std::fs::write(
        &inner_summary,
        summary_text.replacen("\"ppl\"", "\"ppl_was\"", 1),
    )
    .unwrap();
    reseal(out);
    assert_report_refuses(out, "verify-");
    let key = out.parent().unwrap().join("key");
    let made = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "tester", "-f"])
        .arg(&key)
        .status()
        .expect("ssh-keygen (OpenSSH's client) is needed for the signature tests");
    assert!(made.success());
    capshim()
        .arg("sign")
        .arg(out)
        .arg("--key")
        .arg(&key)
        .assert()
        .code(3);
    assert!(!out.join("SHA256SUMS.sig").exists());
    std::fs::write(&inner_sums, sums_text).unwrap();
    std::fs::write(&inner_summary, summary_text).unwrap();
    // The winner's resolved variables (what recommended.toml holds), edited with the
    // recommendation: its processes never set them.
    let mut env: serde_json::Value = serde_json::from_str(&original).unwrap();
    let winner = env["tune"]["candidates"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|c| c["label"] == label)
        .unwrap();
    winner["resolved"]["env"] = serde_json::json!([["BASH_ENV", "/tmp/evil.sh"]]);
    std::fs::write(&env_path, serde_json::to_string_pretty(&env).unwrap()).unwrap();
    let recommended = read(&out.join("recommended.toml"));
    std::fs::write(
        out.join("recommended.toml"),
        format!("{recommended}\n[env]\nBASH_ENV = \"/tmp/evil.sh\"\n"),
    )
    .unwrap();
    refused("did not set BASH_ENV=/tmp/evil.sh, which `resolved.env` holds");
    std::fs::write(out.join("recommended.toml"), &recommended).unwrap();
    // A setting relabelled as another value of its knob: the catalogue's items differ.
    let mut env: serde_json::Value = serde_json::from_str(&original).unwrap();
    let setting = env
        .pointer_mut("/tune/candidates/0/settings/0")
        .unwrap()
        .clone();
    let (knob, value) = (
        setting["knob"].as_str().unwrap(),
        setting["value"].as_str().unwrap(),
    );
    let other = if value == "1" { "0" } else { "1" };
    *env.pointer_mut("/tune/candidates/0/settings/0/value")
        .unwrap() = other.into();
    std::fs::write(&env_path, serde_json::to_string_pretty(&env).unwrap()).unwrap();
    refused(&format!("the setting {knob}={other}"));
    // A process of a candidate dropped from `runs`.
    let mut env: serde_json::Value = serde_json::from_str(&original).unwrap();
    env["runs"].as_array_mut().unwrap().pop();
    std::fs::write(&env_path, serde_json::to_string_pretty(&env).unwrap()).unwrap();
    refused("`runs` holds");
    reseal(out);
    common::assert_report_reproduces(out, &read(&out.join("report.md")));
}

#[test]
fn equal_settings_give_no_winner_and_exit_0_and_a_relabelled_bundle_is_refused() {
    let s = setup();
    let out = s.tmp.path().join("none");
    s.tune(&out, "4s")
        .assert()
        .success()
        .stdout(predicates::str::contains(
            "No setting beats the reference here",
        ));
    let sum = summary(&out);
    assert_eq!(sum["winner"], serde_json::Value::Null, "{sum:#}");
    assert_eq!(sum["verify"], serde_json::Value::Null);
    assert!(!out.join("recommended.toml").exists());
    assert!(
        sum["candidates"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["rounds"].as_u64().unwrap() >= 6),
        "every candidate runs a first stage of 6 rounds: {sum:#}"
    );
    common::assert_report_reproduces(&out, &read(&out.join("report.md")));
    // An edited manifest value the replay uses is refused naming it (exit code 3), never a
    // panic, by report and by report --as-written.
    let env_path = out.join("environment.json");
    let original = read(&env_path);
    let edits: [(&str, serde_json::Value, &str); 6] = [
        ("/tune/first_rounds", 2.into(), "tune.first_rounds is 2"),
        ("/tune/first_rounds", 0.into(), "tune.first_rounds is 0"),
        (
            "/tune/first_rounds",
            1_000_000.into(),
            "tune.first_rounds is 1000000",
        ),
        (
            "/tune/search_seconds",
            (-5.0).into(),
            "tune.search_seconds is -5",
        ),
        (
            "/tune/stages/0/rounds_planned",
            0.into(),
            "tune.stages[0].rounds_planned is 0",
        ),
        (
            "/tune/stages/0/number",
            2.into(),
            "tune.stages[0].number is 2",
        ),
    ];
    for (pointer, value, message) in edits {
        let mut env: serde_json::Value = serde_json::from_str(&original).unwrap();
        *env.pointer_mut(pointer).unwrap() = value;
        std::fs::write(&env_path, serde_json::to_string_pretty(&env).unwrap()).unwrap();
        reseal(&out);
        assert_report_refuses(&out, message);
        capshim()
            .args(["report", "--as-written"])
            .arg(&out)
            .assert()
            .code(3);
    }
    // A round given twice (in a stage that planned one more).
    let mut env: serde_json::Value = serde_json::from_str(&original).unwrap();
    let planned = env.pointer_mut("/tune/stages/0/rounds_planned").unwrap();
    *planned = (planned.as_u64().unwrap() + 1).into();
    let rounds = env.pointer_mut("/tune/stages/0/rounds").unwrap();
    let first = rounds[0].clone();
    rounds.as_array_mut().unwrap().push(first);
    std::fs::write(&env_path, serde_json::to_string_pretty(&env).unwrap()).unwrap();
    reseal(&out);
    assert_report_refuses(&out, "a round given twice");
    std::fs::write(&env_path, &original).unwrap();
    reseal(&out);
    common::assert_report_reproduces(&out, &read(&out.join("report.md")));
    // Relabelled as another layout, or another kind, it is refused (exit code 3).
    let env = read(&env_path);
    std::fs::write(
        &env_path,
        env.replacen("\"schema_version\": 1", "\"schema_version\": 2", 1),
    )
    .unwrap();
    reseal(&out);
    assert_report_refuses(&out, "schema_version");
    std::fs::write(
        &env_path,
        env.replacen("\"kind\": \"tune\"", "\"kind\": \"bench\"", 1),
    )
    .unwrap();
    reseal(&out);
    capshim().arg("report").arg(&out).assert().code(3);
}

#[test]
fn a_faster_setting_verify_finds_different_is_rejected() {
    let s = setup();
    let out = s.tmp.path().join("rejected");
    s.tune(&out, "5s")
        .env("FAKE_FAST", "-fa 1")
        .env("FAKE_KLD_ARGS", "-fa on")
        .env("FAKE_KLD", "0.500000")
        .assert()
        .success()
        .stderr(predicates::str::contains(
            "verify found it different against the reference; it is rejected",
        ));
    let sum = summary(&out);
    assert_eq!(sum["winner"], serde_json::Value::Null, "{sum:#}");
    // Every candidate verified had flash attention on, and was found different.
    let runs = sum["verify_runs"].as_array().unwrap();
    assert!(!runs.is_empty(), "{sum:#}");
    for run in runs {
        assert_eq!(run["verdict"], "different", "{sum:#}");
        let c = candidate(&sum, run["label"].as_str().unwrap());
        assert!(has_item(c, "bench-args=-fa 1"), "{sum:#}");
        assert!(c["interval_low"].as_f64().unwrap() > 1.02, "{c:#}");
    }
    assert_eq!(sum["verify"]["verdict"], "different");
    assert!(!out.join("recommended.toml").exists());
    common::assert_report_reproduces(&out, &read(&out.join("report.md")));
}

#[test]
fn ctrl_c_leaves_an_incomplete_bundle_and_exits_130() {
    let s = setup();
    let out = s.tmp.path().join("stopped");
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("capshim"))
        .current_dir(s.tmp.path())
        .arg("tune")
        .arg("-m")
        .arg(&s.model)
        .arg("--llama-dir")
        .arg(&s.bin)
        .arg("--dylib")
        .arg(&s.shim)
        .args(["--allow-inactive", "--budget", "2m", "-o"])
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Once a few processes ran, Ctrl-C.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::fs::read_dir(out.join("raw")).map_or(0, |d| d.count()) < 6 {
        assert!(std::time::Instant::now() < deadline, "tune ran nothing");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let killed = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    assert_eq!(child.wait().unwrap().code(), Some(130));
    let note = read(&out.join("INCOMPLETE"));
    assert!(note.contains("capshim tune"), "{note}");
    assert!(!out.join("SHA256SUMS").exists());
    capshim()
        .arg("report")
        .arg(&out)
        .assert()
        .code(3)
        .stderr(predicates::str::contains(
            "the capshim run that wrote it did not finish",
        ));
    capshim()
        .args(["report", "--partial"])
        .arg(&out)
        .assert()
        .code(1)
        .stderr(predicates::str::contains(
            "an unfinished `capshim tune` bundle: --partial shows a bench's completed rounds",
        ));
}

#[test]
fn a_budget_without_a_unit_and_a_refused_llama_bench_option_are_usage_errors() {
    let s = setup();
    let out = s.tmp.path().join("never");
    s.tune(&out, "90")
        .assert()
        .code(2)
        .stderr(predicates::str::contains("90 has no unit"));
    s.tune(&out, "1m")
        .args(["--", "-r", "5"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("\"-r\" after `--` is refused"));
    s.tune(&out, "1m")
        .args(["--check", "true"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "--check stands in for verify with --command only",
        ));
    capshim()
        .args(["tune", "--command", "true", "-m", "x.gguf"])
        .assert()
        .code(2);
    // A budget in a unit it does not take, a unit twice, or past 7 days.
    for (budget, message) in [
        ("1ms", "\"ms\" is not a unit --budget takes"),
        ("5m5m", "the unit m is given twice"),
        ("1000000000000000h", "more than the longest budget, 7 days"),
    ] {
        s.tune(&out, budget)
            .assert()
            .code(2)
            .stderr(predicates::str::contains(message));
    }
    // A --reference that cannot resolve is a usage error in tune's words (no --profile).
    s.tune_from(&out, "1m", "native")
        .env_remove("CAPSHIM_CPU_BRAND")
        .assert()
        .code(2)
        .stderr(predicates::str::contains("cannot use --reference native"))
        .stderr(predicates::str::contains("--profile").not());
    assert!(!out.exists(), "no bundle for a refused command line");
    // A failing --command is named as the thing to fix, not llama-bench's options.
    capshim()
        .current_dir(s.tmp.path())
        .args([
            "tune",
            "--command",
            "exit 1",
            "--allow-inactive",
            "--reference",
            "stock",
        ])
        .arg("--dylib")
        .arg(&s.shim)
        .args(["--budget", "5s", "-o", "failing-command"])
        .assert()
        .code(1)
        .stderr(predicates::str::contains(
            "(the command, and the variables and command-args of its candidate)",
        ))
        .stderr(predicates::str::contains("llama-bench options").not());
    capshim()
        .args(["tune", "--list-knobs"])
        .assert()
        .success()
        .stdout(predicates::str::contains("| `flash-attn` |"));
}

#[test]
fn a_command_is_tuned_by_its_wall_time_and_check_stands_in_for_verify() {
    let s = setup();
    // Faster with the shim's variables: the apple9-64k profile wins against stock.
    let command = r#"if [ -n "$CAPSHIM_APPLE_FAMILY_MAX" ]; then sleep 0.01; else sleep 0.04; fi"#;
    let run = |out: &Path, check: &str| {
        let mut cmd = capshim();
        cmd.current_dir(s.tmp.path())
            .args(["tune", "--command", command, "--check", check])
            .arg("--dylib")
            .arg(&s.shim)
            .args([
                "--allow-inactive",
                "--reference",
                "stock",
                "--budget",
                "3s",
                "-o",
            ])
            .arg(out);
        cmd
    };
    let out = s.tmp.path().join("command");
    run(&out, r#"test -n "$CAPSHIM_APPLE_FAMILY_MAX""#)
        .assert()
        .success();
    let sum = summary(&out);
    assert_eq!(sum["command"], command);
    assert_eq!(sum["winner"], "apple9-64k", "{sum:#}");
    assert_eq!(sum["verify"]["verdict"], "passed");
    assert!(
        candidate(&sum, "apple9-64k")["interval_low"]
            .as_f64()
            .unwrap()
            > 1.02
    );
    assert!(read(&out.join("recommended.toml")).contains("apple_family_max = 1009"));
    common::assert_report_reproduces(&out, &read(&out.join("report.md")));
    // A --check that fails rejects the faster setting.
    let out = s.tmp.path().join("command-failed");
    run(&out, "exit 1")
        .assert()
        .success()
        .stderr(predicates::str::contains(
            "its --check failed; it is rejected",
        ));
    let sum = summary(&out);
    assert_eq!(sum["winner"], serde_json::Value::Null, "{sum:#}");
    assert_eq!(sum["verify"]["verdict"], "failed");
    common::assert_report_reproduces(&out, &read(&out.join("report.md")));
}

#[test]
fn candidates_keep_the_reference_s_own_settings_and_change_one_thing() {
    let s = setup();
    let out = s.tmp.path().join("from-ref");
    s.tune_from(&out, "2s", "ref=stock,GGML_X=1,bench-args=-fa 0")
        .assert()
        .success();
    let env = read(&out.join("environment.json"));
    // The profile knob replaces the profile only; an option replaces the reference's value.
    for arm in [
        "apple9-64k=apple9-64k,GGML_X=1,bench-args=-fa 0",
        "fa-on=stock,GGML_X=1,bench-args=-fa 1,common-args=-fa on",
        "ub-256=stock,GGML_X=1,bench-args=-fa 0 -ub 256,common-args=-ub 256",
    ] {
        assert!(env.contains(&format!("\"{arm}\"")), "no arm {arm}: {env}");
    }
    assert!(!env.contains("given twice"), "{env}");
    // A profile file's [args] cannot be replaced by an arm's items: the knob is left out,
    // saying so; the profile knob keeps the file's arguments.
    std::fs::write(
        s.tmp.path().join("slow.toml"),
        "name = \"slow\"\napple_family_max = 1007\nmax_threadgroup_memory = 32768\n\n[args]\nbench = [\"-fa\", \"0\"]\n",
    )
    .unwrap();
    let out = s.tmp.path().join("from-file");
    s.tune_from(&out, "2s", "ref=file=slow.toml")
        .assert()
        .success()
        .stderr(predicates::str::contains(
            "slow.toml gives -fa in its [args]",
        ));
    let env = read(&out.join("environment.json"));
    assert!(
        env.contains("\"apple9-64k=apple9-64k,bench-args=-fa 0\""),
        "{env}"
    );
}

/// A candidate that is the reference again (its own -ub 256) is left out, saying so, and so is a
/// knob whose option is given after `--` for every arm.
#[test]
fn the_references_own_setting_and_an_option_after_the_separator_are_not_searched() {
    let s = setup();
    let out = s.tmp.path().join("placebo");
    s.tune_from(
        &out,
        "2s",
        "ref=stock,bench-args=-ub 256,common-args=-ub 256",
    )
    .args(["--", "-fa", "1"])
    .assert()
    .success()
    .stderr(predicates::str::contains(
        "ub-256: ubatch=256 is the reference's own setting; nothing to compare",
    ))
    .stderr(predicates::str::contains(
        "fa-on: -fa is given after `--` (-fa) for every arm, so it is not searched",
    ));
    let sum = summary(&out);
    let labels: Vec<&str> = sum["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["label"].as_str().unwrap())
        .collect();
    assert!(
        !labels.contains(&"ub-256") && !labels.contains(&"fa-on"),
        "{labels:?}"
    );
    // The other knobs are still searched.
    assert!(labels.len() >= 2, "{labels:?}");
}

#[test]
fn a_budget_for_first_stages_only_is_too_few_rounds_to_tell_not_no_winner() {
    let s = setup();
    let out = s.tmp.path().join("short");
    // At 0.1 s a process, 1 s pays for less than the first stage.
    let assert = s
        .tune(&out, "1s")
        .env("FAKE_SLEEP", "0.1")
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    let sum = summary(&out);
    let needed = sum["rounds_needed"].as_u64().unwrap();
    // The fake tools' knobs on Linux: 9 candidates, so 99.44%, which needs 9 rounds.
    assert!(needed > 6, "{sum:#}");
    assert_eq!(sum["too_few_rounds"], true, "{sum:#}");
    assert_eq!(sum["winner"], serde_json::Value::Null);
    let text = format!("too few rounds to tell ({needed} needed at the ");
    assert!(stdout.contains(&text), "{stdout}");
    assert!(!stdout.contains("No setting beats"), "{stdout}");
    assert!(stderr.contains(&text), "{stderr}");
    assert!(
        stdout.contains(&format!("({needed} rounds needed at ")),
        "{stdout}"
    );
    common::assert_report_reproduces(&out, &read(&out.join("report.md")));
}

#[test]
fn a_candidate_whose_every_run_fails_is_named_in_a_warning_with_keep_going() {
    let s = setup();
    let out = s.tmp.path().join("failing");
    let assert = s
        .tune(&out, "3s")
        .arg("--keep-going")
        .env("FAKE_FAIL", "-fa 1")
        .assert()
        .success();
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    let sum = summary(&out);
    let failed = sum["failed_runs"].as_array().unwrap();
    assert!(!failed.is_empty(), "{sum:#}");
    assert!(failed.iter().all(|f| f["arm"] == "fa-on"), "{sum:#}");
    assert!(
        failed[0]["reason"].as_str().unwrap().contains("exit"),
        "{sum:#}"
    );
    let warning = "every run of `fa-on` failed";
    assert!(
        sum["warnings"][0].as_str().unwrap().contains(warning),
        "{sum:#}"
    );
    assert!(read(&out.join("report.md")).contains(warning));
    assert!(stderr.contains(warning), "{stderr}");
    common::assert_report_reproduces(&out, &read(&out.join("report.md")));

    // Every candidate's every run fails (the command exits 3 under the shim's variables): no
    // result, and not "too few rounds", which a larger budget cannot mend.
    let all = s.tmp.path().join("all-failing");
    let assert = capshim()
        .current_dir(s.tmp.path())
        .args([
            "tune",
            "--command",
            r#"sleep 0.01; [ -z "$CAPSHIM_APPLE_FAMILY_MAX" ] || exit 3"#,
        ])
        .arg("--dylib")
        .arg(&s.shim)
        .args(["--allow-inactive", "--reference", "stock", "--budget", "2s"])
        .arg("--keep-going")
        .arg("-o")
        .arg(&all)
        .assert()
        .success();
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    let report = read(&all.join("report.md"));
    assert!(
        report.contains("**No result: no candidate gave a figure")
            && report.contains("A larger --budget would not help")
            && !report.contains("too few rounds"),
        "{report}"
    );
    assert!(stderr.contains("no candidate gave a figure"), "{stderr}");
    common::assert_report_reproduces(&all, &report);
}
