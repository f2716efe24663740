//! `capshim tune` end to end against the real CPU llama.cpp and the tiny model built by
//! `scripts/llama/build.sh` (paths as in `llama_e2e.rs`), with a budget of under a minute: the
//! knobs that exist here are searched, the bundle is sealed, and `capshim report` derives it
//! again. `-t 1` as in `llama_e2e.rs` (llama.cpp's threads spin on a shared 2-core machine),
//! which leaves the threads knob out: tune says so.
#![cfg(unix)]

mod common;

use common::{assert_report_reproduces, capshim, read, real_llama, real_shim};

#[test]
fn tune_searches_the_knobs_of_cpu_llama_cpp_within_its_budget() {
    let (llama, model) = real_llama();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("tuned");
    let started = std::time::Instant::now();
    let assert = capshim()
        .arg("tune")
        .arg("-m")
        .arg(&model)
        .arg("--llama-bench")
        .arg(&llama)
        .arg("--dylib")
        .arg(real_shim())
        .args([
            "--allow-inactive",
            "--budget",
            "50s",
            "-r",
            "2",
            "-p",
            "32",
            "-n",
            "8",
        ])
        .arg("-o")
        .arg(&out)
        .args(["--", "-t", "1"])
        .assert()
        .success();
    let took = started.elapsed().as_secs_f64();
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    let summary: serde_json::Value =
        serde_json::from_str(&read(&out.join("summary.json"))).unwrap();
    eprintln!("{stderr}\n{}", read(&out.join("report.md")));
    assert_eq!(summary["kind"], "tune");
    let candidates = summary["candidates"].as_array().unwrap();
    assert!(candidates.len() >= 3, "{summary:#}");
    // The first stage runs every candidate 6 rounds, unless the budget ran out first.
    assert!(
        candidates
            .iter()
            .any(|c| c["rounds"].as_u64().unwrap() >= 6),
        "{summary:#}"
    );
    // A knob given after `--` is not searched, and the run says so.
    let left_out = summary["left_out"].as_array().unwrap();
    assert!(
        left_out.iter().any(|n| n.as_str().unwrap().contains("-t")),
        "{left_out:?}"
    );
    assert!(stderr.contains("left out"), "{stderr}");
    match summary["winner"].as_str() {
        Some(_) => {
            assert_eq!(summary["verify"]["verdict"], "equivalent");
            assert!(out.join("recommended.toml").is_file());
        }
        None => assert!(!out.join("recommended.toml").exists()),
    }
    // The budget plus one round plus a verify: well within 2 minutes even on a busy machine.
    assert!(took < 120.0, "tune took {took:.0} s for a 50 s budget");
    assert_report_reproduces(&out, &read(&out.join("report.md")));
}
