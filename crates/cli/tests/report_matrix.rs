//! `capshim report --matrix` and `--llama-json` over saved bundles (copied, since a check
//! must see them as written), and labels across bundles in the plain report.
#![cfg(unix)]

mod common;

use std::path::{Path, PathBuf};

use common::{bench, capshim, fake_llama_bench, reseal};

/// A copy of the saved bundle `name` in `dir`.
fn saved(dir: &Path, name: &str) -> PathBuf {
    let from = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/bundles")
        .join(name);
    let to = dir.join(name);
    let status = std::process::Command::new("cp")
        .arg("-R")
        .arg(&from)
        .arg(&to)
        .status()
        .unwrap();
    assert!(status.success());
    to
}

fn stdout(assert: assert_cmd::assert::Assert) -> String {
    String::from_utf8(assert.get_output().stdout.clone()).unwrap()
}

#[test]
fn a_matrix_has_a_row_per_machine_and_model_and_verify_verdicts_as_columns() {
    let tmp = tempfile::tempdir().unwrap();
    let unlocked = saved(tmp.path(), "bench5-fake-unlocked");
    let real = saved(tmp.path(), "bench5-real-aa");
    let verify = saved(tmp.path(), "verify1-fake-equivalent");
    let md = stdout(
        capshim()
            .args(["report", "--matrix"])
            .args([&unlocked, &real, &verify])
            .assert()
            .code(0),
    );
    let lines: Vec<&str> = md.lines().filter(|l| l.starts_with('|')).collect();
    // Header, rule, and two rows: the fake model (bench and verify of one machine and model
    // share a row) and the real one.
    assert_eq!(lines.len(), 4, "{md}");
    for header in [
        "| CPU ",
        "| Model ",
        "t/s stock pp64",
        "Speedup apple9-64k pp64",
        "verify apple9-64k",
    ] {
        assert!(lines[0].contains(header), "{header}: {md}");
    }
    assert!(lines[2].contains("fake (c57ef291fdc0)"), "{md}");
    assert!(lines[2].contains("10.00× [10.00 10.00]"), "{md}");
    assert!(lines[2].contains("equivalent"), "{md}");
    assert!(lines[3].contains("tiny-llama-q4_k_m"), "{md}");
    assert!(!lines[3].contains("equivalent"), "{md}");

    let csv = stdout(
        capshim()
            .args(["report", "--matrix", "--csv"])
            .args([&unlocked, &real, &verify])
            .assert()
            .code(0),
    );
    let mut reader = csv::Reader::from_reader(csv.as_bytes());
    let headers = reader.headers().unwrap().clone();
    for name in [
        "bundle",
        "machine",
        "model",
        "arm",
        "test",
        "value",
        "unit",
        "speedup",
        "ci95_low",
        "ci95_high",
        "verdict",
        "kld_mean",
    ] {
        assert!(headers.iter().any(|h| h == name), "{name}: {headers:?}");
    }
    let records: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    let col = |n: &str| headers.iter().position(|h| h == n).unwrap();
    let bundles: std::collections::BTreeSet<&str> =
        records.iter().map(|r| &r[col("bundle")]).collect();
    assert_eq!(bundles.len(), 3, "{csv}");
    let native = records
        .iter()
        .find(|r| &r[col("arm")] == "apple9-64k" && &r[col("test")] == "pp64")
        .unwrap();
    assert_eq!(&native[col("value")], "10000");
    assert_eq!(&native[col("speedup")], "10");
    assert_eq!(&native[col("unit")], "tokens/s");
    let verdict = records
        .iter()
        .find(|r| &r[col("arm")] == "apple9-64k" && &r[col("test")] == "verify")
        .unwrap();
    assert_eq!(&verdict[col("verdict")], "equivalent");
    assert_eq!(&verdict[col("kld_mean")], "0.00002");

    let svg = stdout(
        capshim()
            .args(["report", "--matrix", "--svg"])
            .args([&unlocked, &real])
            .assert()
            .code(0),
    );
    assert!(svg.starts_with("<svg") && svg.contains("10.00×"), "{svg}");
}

#[test]
fn every_matrix_bundle_is_checked() {
    let tmp = tempfile::tempdir().unwrap();
    let unlocked = saved(tmp.path(), "bench5-fake-unlocked");
    let real = saved(tmp.path(), "bench5-real-aa");
    // An edit with SHA256SUMS regenerated: only deriving the files again finds it.
    let summary = real.join("summary.json");
    let text = std::fs::read_to_string(&summary).unwrap().replacen(
        "\"median_ts\": ",
        "\"median_ts\": 1",
        1,
    );
    std::fs::write(&summary, text).unwrap();
    reseal(&real);
    capshim()
        .args(["report", "--matrix"])
        .args([&unlocked, &real])
        .assert()
        .code(3);
    capshim()
        .args(["report", "--matrix", "--json"])
        .arg(&unlocked)
        .assert()
        .code(2);
}

#[test]
fn llama_json_relabels_build_commit_by_arm() {
    let tmp = tempfile::tempdir().unwrap();
    let unlocked = saved(tmp.path(), "bench5-fake-unlocked");
    let out = stdout(
        capshim()
            .args(["report", "--llama-json"])
            .arg(&unlocked)
            .assert()
            .code(0),
    );
    let results: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap();
    // 6 rounds × 2 arms × 2 tests, every one labelled with its arm and otherwise as written.
    assert_eq!(results.len(), 24, "{out}");
    let stock = results
        .iter()
        .filter(|r| r["build_commit"] == "stock")
        .count();
    let native = results
        .iter()
        .filter(|r| r["build_commit"] == "apple9-64k")
        .count();
    assert_eq!((stock, native), (12, 12));
    assert!(results.iter().all(|r| r["samples_ts"].is_array()));
    // A verify bundle holds no llama-bench results.
    let verify = saved(tmp.path(), "verify1-fake-equivalent");
    capshim()
        .args(["report", "--llama-json"])
        .arg(&verify)
        .assert()
        .code(2);
}

/// Two bundles of different models: each row names both models, and no warning says the
/// comparison is between different models, since no arm of one is compared with the other's.
#[test]
fn bundles_of_different_models_are_labelled_each_and_not_warned_about() {
    let tmp = tempfile::tempdir().unwrap();
    let llama = fake_llama_bench(tmp.path());
    let mut dirs = Vec::new();
    for name in ["alpha", "beta"] {
        let model = tmp.path().join(format!("{name}.gguf"));
        std::fs::write(&model, b"GGUF fake model").unwrap();
        let out = tmp.path().join(format!("b-{name}"));
        bench(&llama, &model)
            .args([
                "--profile",
                "again=stock",
                "-r",
                "3",
                "-p",
                "64",
                "-n",
                "16",
            ])
            .args(["--rounds", "2", "-o"])
            .arg(&out)
            .assert()
            .success();
        dirs.push(out);
    }
    let assert = capshim().arg("report").args(&dirs).assert().code(0);
    let md = stdout(assert);
    let stderr =
        String::from_utf8(capshim().arg("report").args(&dirs).output().unwrap().stderr).unwrap();
    let pp = md.lines().find(|l| l.contains("pp64")).unwrap();
    assert!(pp.contains("alpha") && pp.contains("beta"), "{md}");
    assert!(
        !md.contains("different models") && !stderr.contains("different models"),
        "{md}\n{stderr}"
    );
}
