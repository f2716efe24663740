//! `capshim selftest` on Linux: the activation check against the real shim
//! (`target/<profile>/libcapshim.so`, found next to the capshim executable) injected into the
//! simulated guest's probe, as `cargo xtask demo` runs it; every kernel check skipped (no
//! Metal device); the evidence bundle checked by `capshim report`.
//!
//! Needs the shim built: `cargo test --workspace` builds it; alone, run
//! `cargo build -p capshim` first.
#![cfg(target_os = "linux")]

mod common;

use assert_cmd::Command;
use capshim_simguest::guest;
use common::{assert_report_refuses, read, real_shim, reseal};
use predicates::prelude::*;

fn capshim() -> Command {
    real_shim();
    common::capshim()
}

fn probe() -> String {
    guest().unwrap().probe.display().to_string()
}

fn json(stdout: &[u8]) -> serde_json::Value {
    serde_json::from_slice(stdout).unwrap()
}

#[test]
fn the_shim_activates_in_the_simulated_probe_and_kernels_are_skipped() {
    let out = capshim()
        .args(["selftest", "--json", "--probe", &probe()])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = json(&out.stdout);
    let checks = report["checks"].as_array().unwrap();
    assert_eq!(checks.len(), 5);
    assert_eq!(checks[0]["id"], "activation");
    assert_eq!(checks[0]["status"], "ok", "{}", checks[0]);
    assert!(
        checks[0]["summary"].as_str().unwrap().starts_with(&format!(
            "hooked {} in probe (pid ",
            capshim_simguest::PARAVIRTUAL
        )),
        "{}",
        checks[0]
    );
    assert!(checks[0]["time_ms"].as_f64().unwrap() > 0.0);
    for c in &checks[1..] {
        assert!(c["id"].as_str().unwrap().starts_with("kernel."), "{c}");
        assert_eq!(c["status"], "skip", "{c}");
        assert_eq!(
            c["summary"], "not run: no Metal device (this is linux)",
            "{c}"
        );
        assert!(c["fix"].is_null() && c["time_ms"].is_null(), "{c}");
    }
    assert_eq!(report["exit_code"], 0);
}

#[test]
fn a_probe_where_the_shim_does_not_activate_fails_with_exit_5() {
    // `true` loads the shim but never creates a Metal device: nothing was hooked.
    capshim()
        .args(["selftest", "--probe", "/bin/true"])
        .assert()
        .code(5)
        .stdout(predicate::str::contains(
            "fail  activation                 not activated: true (pid ",
        ))
        .stdout(predicate::str::contains(
            "-- fix: `capshim doctor -- /bin/true` shows what stops the shim",
        ));
}

#[test]
fn without_a_probe_on_linux_nothing_is_checked_and_nothing_fails() {
    let out = capshim().args(["selftest", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let report = json(&out.stdout);
    assert_eq!(report["checks"][0]["status"], "skip");
    assert_eq!(report["counts"]["skip"], 5);
    capshim()
        .args(["selftest", "--profile", "stock"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--profile stock claims nothing"));
}

#[test]
fn the_bundle_is_checked_and_shown_by_report() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("selftest");
    let out = capshim()
        .args(["selftest", "--json", "--probe", &probe(), "-o"])
        .arg(&dir)
        .args(["--cpu-brand", "Apple M1 Ultra (Virtual)"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    // The bundle holds what was printed, and report derives it again.
    assert_eq!(read(&dir.join("checks.json")).as_bytes(), &out.stdout[..]);
    for raw in [
        "raw/probe.status.jsonl",
        "raw/probe.stdout",
        "raw/probe.stderr",
    ] {
        assert!(dir.join(raw).is_file(), "{raw}");
    }
    let env: serde_json::Value =
        serde_json::from_str(&read(&dir.join("environment.json"))).unwrap();
    assert_eq!(env["kind"], "selftest");
    assert_eq!(env["selftest"]["profile"]["name"], "native");
    assert_eq!(
        env["files"]["dylib"]["path"],
        real_shim().display().to_string()
    );
    capshim()
        .args(["report", "--json"])
        .arg(&dir)
        .assert()
        .success()
        .stdout(String::from_utf8(out.stdout).unwrap());
    capshim()
        .arg("report")
        .arg(&dir)
        .assert()
        .success()
        .stdout(predicate::str::starts_with("# capshim selftest\n"))
        .stdout(predicate::str::contains(
            "skip  kernel.threadgroup_memory  not claimed beyond stock: the stock device already answers 32768 bytes",
        ));
    // A bundle is never overwritten.
    capshim()
        .args(["selftest", "--probe", &probe(), "-o"])
        .arg(&dir)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("never overwritten"));

    // Another layout is shown as written (its checksums checked), saying so.
    let copy = tmp.path().join("other-layout");
    std::fs::create_dir(&copy).unwrap();
    let status = std::process::Command::new("cp")
        .arg("-R")
        .arg(dir.join("."))
        .arg(&copy)
        .status()
        .unwrap();
    assert!(status.success());
    let env_file = copy.join("environment.json");
    let text = read(&env_file).replacen("\"schema_version\": 2", "\"schema_version\": 99", 1);
    std::fs::write(&env_file, text).unwrap();
    reseal(&copy);
    // (Refused since report refuses unknown layouts, exit 3; shown only with --as-written.)
    capshim()
        .args(["report", "--json"])
        .arg(&copy)
        .assert()
        .code(3)
        .stderr(predicate::str::contains(
            "schema_version 99: this capshim never wrote a selftest bundle of that layout; it \
             derives schema_version 1, 2",
        ));
    capshim()
        .args(["report", "--json", "--as-written"])
        .arg(&copy)
        .assert()
        .code(4)
        .stdout(predicate::str::ends_with(read(&dir.join("checks.json"))));

    // The status file edited so that the probe never activated, and the sums regenerated:
    // checks.json is no longer what the raw files give.
    let status = dir.join("raw/probe.status.jsonl");
    let stock_only: String = read(&status)
        .lines()
        .filter(|l| !l.contains("\"hooked\""))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&status, stock_only).unwrap();
    assert_report_refuses(&dir, "was changed after it was written");
    reseal(&dir);
    assert_report_refuses(&dir, "checks.json does not match the raw data");
}
