//! `capshim bench` end to end against the real llama-bench and a tiny real model, built by
//! `scripts/llama/build.sh` (CI runs it before the tests). Paths come from
//! `CAPSHIM_TEST_LLAMA_BENCH` and `CAPSHIM_TEST_MODEL`, defaulting to the script's cache.
//!
//! The runs use `-t 1`: on a shared 2-core machine, llama.cpp's OpenMP threads spin at barriers
//! and `-t 2` next to another busy process swings throughput by 100× between samples, while
//! `-t 1` stays within tens of percent. The tests share one lock so that they never measure
//! while another of them is running llama-bench.
#![cfg(unix)]

mod common;

use std::path::Path;
use std::sync::Mutex;

use common::{assert_report_refuses, assert_report_reproduces, bench, read, real_llama};
use predicates::prelude::*;
use sha2::{Digest, Sha256};

static LLAMA: Mutex<()> = Mutex::new(());

fn sha256(path: &Path) -> String {
    let digest = Sha256::digest(std::fs::read(path).unwrap());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn aa_run_bundle_report_round_trip_and_tamper_detection() {
    let (llama, model) = real_llama();
    let _lock = LLAMA.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let run = |out: &Path| {
        let mut cmd = bench(&llama, &model);
        cmd.args(["--profile", "again=stock"])
            .args(["-r", "5", "-p", "32", "-n", "8", "--rounds", "6", "-o"])
            .arg(out)
            .args(["--", "-t", "1"]);
        cmd
    };
    // A/A: two identical stock arms; every speedup interval should contain 1. Each is a 95%
    // interval, so even when everything is right both contain 1 in about 90% of runs (measured
    // here: 9 of 10). Up to three independent runs are allowed: three misses in a row (about
    // 0.1% when calibrated) mean the intervals are too narrow or the arms are not alike.
    let mut misses = Vec::new();
    let (out, stdout) = loop {
        let out = tmp.path().join(format!("aa-{}", misses.len() + 1));
        let assert = run(&out).assert().success();
        let stdout = String::from_utf8(assert.get_output().stdout.clone()).unwrap();
        let summary: serde_json::Value =
            serde_json::from_str(&read(&out.join("summary.json"))).unwrap();
        let rows = summary["rows"].as_array().unwrap();
        let tests: Vec<&str> = rows.iter().map(|r| r["test"].as_str().unwrap()).collect();
        assert_eq!(tests, ["pp32", "tg8"]);
        let mut excluded = Vec::new();
        for row in rows {
            let again = &row["arms"]["again"];
            assert_eq!(again["samples"], 30, "5 repetitions x 6 rounds");
            assert_eq!(again["rounds"].as_array().unwrap().len(), 6);
            let ci = &again["speedup_ci95"];
            let (low, high) = (ci["low"].as_f64().unwrap(), ci["high"].as_f64().unwrap());
            if !(low <= 1.0 && 1.0 <= high) {
                excluded.push(format!("{}: {low:.3}..{high:.3}", row["test"]));
            }
        }
        if excluded.is_empty() {
            break (out, stdout);
        }
        misses.push(format!("{}\n{stdout}", excluded.join(", ")));
        assert!(
            misses.len() < 3,
            "A/A: a 95% interval excluded 1.0 in three runs in a row:\n{}",
            misses.join("\n")
        );
    };
    eprintln!("{stdout}");

    // A CPU build of llama.cpp prints no ggml-metal lines: capabilities are "not reported".
    assert!(
        stdout.contains("- stock: not reported (no ggml-metal device lines on stderr"),
        "{stdout}"
    );
    assert!(stdout.contains("- again: no shim"), "{stdout}");

    // The environment names the llama.cpp build and the exact files.
    let env: serde_json::Value =
        serde_json::from_str(&read(&out.join("environment.json"))).unwrap();
    assert!(env["llama_cpp"]["build_number"].is_number(), "{env}");
    assert!(env["llama_cpp"]["build_commit"].is_string(), "{env}");
    assert_eq!(env["files"]["model"]["sha256"], sha256(&model));
    assert_eq!(env["files"]["llama_bench"]["sha256"], sha256(&llama));
    assert!(env["files"]["dylib"].is_null());
    assert_eq!(env["runs"].as_array().unwrap().len(), 12);
    assert!(
        env["machine"]["kernel"]
            .as_str()
            .unwrap()
            .starts_with("Linux")
    );
    assert!(env["machine"]["cpu_brand"].is_string());
    assert!(
        env["runs"][0]["command_line"]
            .as_str()
            .unwrap()
            .ends_with("-r 5 -p 32 -n 8 -o json -t 1")
    );
    let raw = read(&out.join("raw/stock-r1.json"));
    let summary: serde_json::Value =
        serde_json::from_str(&read(&out.join("summary.json"))).unwrap();
    assert_eq!(summary["rows"][0]["arms"]["again"]["samples"], 30);
    assert!(raw.contains("\"samples_ts\""), "{raw}");

    // report re-renders the bundle exactly, after checking it.
    assert_eq!(read(&out.join("report.md")), stdout);
    assert_report_reproduces(&out, &stdout);

    // Never overwritten: refused before anything runs.
    run(&out)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("never overwritten"));

    // Tampered: exit code 3 and nothing on stdout.
    let changed = out.join("raw/again-r2.json");
    std::fs::write(
        &changed,
        raw.replacen("\"samples_ts\": [ ", "\"samples_ts\": [ 1, ", 1),
    )
    .unwrap();
    assert_report_refuses(&out, "raw/again-r2.json does not match its checksum");
}

/// Linux only: it checks the message for a system without Metal (on a Mac the CPU build of
/// llama-bench creates no device either, but bench says something else).
#[cfg(target_os = "linux")]
#[test]
fn an_unlocked_arm_cannot_activate_on_linux() {
    let (llama, model) = real_llama();
    let _lock = LLAMA.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let shim = common::inert_shim(tmp.path());
    let bench_with_shim = |out: &Path, flags: &[&str]| {
        let mut cmd = bench(&llama, &model);
        cmd.args(flags)
            .arg("--dylib")
            .arg(&shim)
            .args(["-r", "2", "-p", "32", "-n", "8", "--rounds", "1", "-o"])
            .arg(out)
            .args(["--", "-t", "1"]);
        cmd
    };
    // No Metal: no `hooked` event, so the default is a clear error.
    bench_with_shim(&tmp.path().join("refused"), &[])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "the shim did not activate in arm apple9-64k round 1",
        ))
        .stderr(predicate::str::contains(
            "Linux has none, so the shim never activates there",
        ))
        .stderr(predicate::str::contains("--allow-inactive"));

    // --allow-inactive measures anyway and says so.
    let out = tmp.path().join("allowed");
    let assert = bench_with_shim(&out, &["--allow-inactive"])
        .assert()
        .success();
    let stdout = String::from_utf8(assert.get_output().stdout.clone()).unwrap();
    assert!(
        stdout.contains("- apple9-64k: shim did NOT activate"),
        "{stdout}"
    );
    assert!(
        stdout.contains("its figures are a stock guest's"),
        "{stdout}"
    );
    assert!(out.join("raw/apple9-64k-r1.status.jsonl").is_file());
    let sums = read(&out.join("SHA256SUMS"));
    assert!(
        sums.contains("  raw/apple9-64k-r1.status.jsonl\n"),
        "{sums}"
    );
    let env: serde_json::Value =
        serde_json::from_str(&read(&out.join("environment.json"))).unwrap();
    assert_eq!(env["files"]["dylib"]["sha256"], sha256(&shim));
    // The round's order is random: the unlocked arm's run, wherever it ran.
    let runs = env["runs"].as_array().unwrap();
    let unlocked = runs.iter().find(|r| r["arm"] == "apple9-64k").unwrap();
    let set = unlocked["env"]["set"].to_string();
    assert!(
        set.contains("LD_PRELOAD") && set.contains("CAPSHIM_APPLE_FAMILY_MAX"),
        "{set}"
    );
    assert_report_reproduces(&out, &stdout);

    // With the real shim (built by cargo next to capshim), the chain shim -> status file ->
    // bench is real too: it loads, reports `active`, and hooks nothing without Metal. Without
    // --dylib, bench finds it next to the capshim executable.
    if common::shim_next_to_capshim()
        .canonicalize()
        .ok()
        .as_deref()
        == Some(shim.as_path())
    {
        let status = read(&out.join("raw/apple9-64k-r1.status.jsonl"));
        assert!(status.contains("\"event\":\"active\""), "{status}");
        assert!(!status.contains("\"event\":\"hooked\""), "{status}");
        assert!(
            stdout.contains("it loaded with its profile but hooked no Metal device class"),
            "{stdout}"
        );
        bench(&llama, &model)
            .args(["-r", "1", "-p", "32", "-n", "8", "--rounds", "1", "-o"])
            .arg(tmp.path().join("default-dylib"))
            .args(["--", "-t", "1"])
            .assert()
            .code(1)
            .stderr(predicate::str::contains(
                "The shim loaded and accepted its profile, but the program created no Metal device",
            ))
            // A process that never creates a device: the shim says nothing on stderr.
            .stderr(predicate::str::contains(
                "it printed no `capshim:` line on stderr",
            ));
    }

    // A shim path that does not exist is refused before anything runs.
    bench(&llama, &model)
        .arg("--dylib")
        .arg(tmp.path().join("nowhere/libcapshim.so"))
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "nowhere/libcapshim.so does not exist",
        ));
}

/// llama-bench escapes each byte of a non-ASCII model file name in its JSON as a truncated
/// `\uffff` (where `char` is signed, as on x86-64); the report shows the name capshim gave it.
#[test]
fn a_non_ascii_model_name_shows_as_given() {
    let (llama, model) = real_llama();
    let _lock = LLAMA.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let named = tmp.path().join("modèle-ü.gguf");
    std::fs::copy(&model, &named).unwrap();
    let out = tmp.path().join("accents");
    let assert = bench(&llama, &named)
        .args(["--profile", "again=stock", "-r", "1", "-p", "8", "-n", "4"])
        .args(["--rounds", "1", "-o"])
        .arg(&out)
        .args(["--", "-t", "1"])
        .assert()
        .success();
    let stdout = String::from_utf8(assert.get_output().stdout.clone()).unwrap();
    assert!(stdout.contains("| modèle-ü | pp8 "), "{stdout}");
    assert!(!stdout.contains('\u{ffff}'), "{stdout}");
}
