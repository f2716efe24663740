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

/// An arm compared with another bundle's stock: a ratio of medians with its spread, no
/// interval and no verdict, and the note says why. Arms of the stock's own bundle keep theirs.
#[test]
fn a_comparison_across_bundles_has_no_interval_and_no_verdict() {
    let tmp = tempfile::tempdir().unwrap();
    let aa = saved(tmp.path(), "bench5-fake-aa");
    let unlocked = saved(tmp.path(), "bench5-fake-unlocked");
    let stock = "bench5-fake-aa/stock";
    let json: serde_json::Value = serde_json::from_str(&stdout(
        capshim()
            .args(["report", "--json", "--stock", stock])
            .args([&aa, &unlocked])
            .assert()
            .code(0),
    ))
    .unwrap();
    for row in json["rows"].as_array().unwrap() {
        let across = &row["arms"]["bench5-fake-unlocked/apple9-64k"];
        assert!(across["speedup_ci95"].is_null(), "{across}");
        assert!(across["verdict"].is_null(), "{across}");
        assert!((across["speedup_vs_stock"].as_f64().unwrap() - 10.0).abs() < 1e-9);
        let spread = across["speedup_spread"].as_array().unwrap();
        assert_eq!(spread.len(), 2);
        let why = across["speedup_no_interval"].as_str().unwrap();
        assert!(
            why.contains("did not run in the same capshim bench"),
            "{why}"
        );
        let own = &row["arms"]["bench5-fake-aa/again"];
        assert!(own["speedup_ci95"].is_object(), "{own}");
        assert!(own.get("speedup_spread").is_none(), "{own}");
    }
    let md = stdout(
        capshim()
            .args(["report", "--stock", stock])
            .args([&aa, &unlocked])
            .assert()
            .code(0),
    );
    let table = md.lines().find(|l| l.contains("| pp64")).unwrap();
    assert!(
        table.contains("10.00×") && !table.contains("10.00× ["),
        "{md}"
    );
}

/// With a host arm, token generation also says the milliseconds each token costs beyond it.
#[test]
fn generation_against_a_host_gives_milliseconds_per_token_beyond_it() {
    use common::{result, samples_with_median, write_json};
    let tmp = tempfile::tempdir().unwrap();
    let host = write_json(
        tmp.path(),
        "host.json",
        &[
            result("m", 512, 0, &samples_with_median(1000.0, 5)),
            result("m", 0, 128, &samples_with_median(100.0, 5)),
        ],
    );
    let guest = write_json(
        tmp.path(),
        "guest.json",
        &[
            result("m", 512, 0, &samples_with_median(500.0, 5)),
            result("m", 0, 128, &samples_with_median(50.0, 5)),
        ],
    );
    let mut host_arm = std::ffi::OsString::from("host=");
    host_arm.push(&host);
    let mut stock_arm = std::ffi::OsString::from("stock=");
    stock_arm.push(&guest);
    let json: serde_json::Value = serde_json::from_str(&stdout(
        capshim()
            .args(["report", "--json", "--arm"])
            .arg(&host_arm)
            .arg("--arm")
            .arg(&stock_arm)
            .assert()
            .code(0),
    ))
    .unwrap();
    let rows = json["rows"].as_array().unwrap();
    let tg = rows.iter().find(|r| r["test"] == "tg128").unwrap();
    let ms = tg["arms"]["stock"]["ms_per_token_over_host"]
        .as_f64()
        .unwrap();
    assert!((ms - 10.0).abs() < 1e-9, "{ms}");
    let pp = rows.iter().find(|r| r["test"] == "pp512").unwrap();
    assert!(pp["arms"]["stock"].get("ms_per_token_over_host").is_none());
}
