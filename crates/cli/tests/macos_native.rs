//! On a Mac, the shim in real processes on the real Metal device (they run in the GitHub
//! macOS job; on Linux this file is empty and run_simguest.rs covers the same ground in the
//! simulated guest):
//!
//! - the shim activates in a child started by `capshim run` and its answers are exactly what
//!   the profile says: Apple1 up to the profile's family true, every other family as stock,
//!   threadgroup memory max(stock, profile), the working set untouched;
//! - the device class it hooked (`AppleParavirtDevice` in a VM);
//! - a process that loads the library without a configuration is untouched;
//! - under `--scope process`, a child of the hooked process stays stock;
//! - the simulated-guest suites are Linux-only, and say so.
//!
//! Needs the shim built next to capshim (`cargo build --workspace`, as the job does).
#![cfg(target_os = "macos")]

mod common;

use std::path::PathBuf;

use common::{capshim, real_shim};
use serde_json::Value;

/// `capshim probe --json` in a process of its own, with exactly `env` added.
fn probe(env: &[(&str, PathBuf)]) -> Value {
    let mut cmd = capshim();
    cmd.args(["probe", "--json"]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "capshim probe: {out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

fn capshim_path() -> PathBuf {
    assert_cmd::cargo::cargo_bin("capshim")
}

/// Whether this Mac is a virtual machine (`sysctl kern.hv_vmm_present` is 1).
fn in_a_vm() -> bool {
    let out = std::process::Command::new("/usr/sbin/sysctl")
        .args(["-n", "kern.hv_vmm_present"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim() == "1"
}

/// The families of a probe's JSON, by number.
fn families(v: &Value) -> Vec<(i64, bool)> {
    v["families"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, b)| (k.parse().unwrap(), b.as_bool().unwrap()))
        .collect()
}

#[test]
fn the_shim_activates_in_a_child_and_answers_exactly_as_the_profile_says() {
    real_shim();
    let stock = probe(&[]);
    let cases: [(&[&str], i64, u64); 2] = [
        (
            &["--family-max", "1007", "--threadgroup-memory", "32768"],
            1007,
            32768,
        ),
        (&["--profile", "apple9-64k"], 1009, 65536),
    ];
    for (profile, family_max, threadgroup) in cases {
        let out = capshim()
            .args(["run", "--require-active"])
            .args(profile)
            .arg("--")
            .arg(capshim_path())
            .args(["probe", "--json"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "{profile:?}: not activated?\n{stderr}"
        );
        let shimmed: Value = serde_json::from_slice(&out.stdout).unwrap();

        for ((family, before), (same, after)) in
            families(&stock).into_iter().zip(families(&shimmed))
        {
            assert_eq!(family, same);
            let want = before || (1001..=family_max).contains(&family);
            assert_eq!(after, want, "{profile:?}: family {family}: stock {before}");
        }
        let stock_tg = stock["max_threadgroup_memory"].as_u64().unwrap();
        assert_eq!(
            shimmed["max_threadgroup_memory"].as_u64(),
            Some(stock_tg.max(threadgroup)),
            "{profile:?}"
        );
        assert_eq!(
            shimmed["recommended_working_set_size"], stock["recommended_working_set_size"],
            "{profile:?}: no profile here sets the working set"
        );

        // The hooked class, from run's activation line.
        let class = stderr
            .split("hooked ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_else(|| panic!("no `hooked CLASS` in:\n{stderr}"));
        eprintln!("{profile:?}: hooked {class}");
        if in_a_vm() {
            assert_eq!(class, "AppleParavirtDevice", "the guest's device class");
        }
    }
}

#[test]
fn a_process_that_loads_the_shim_without_a_configuration_is_untouched() {
    let shim = real_shim();
    let stock = probe(&[]);
    let loaded = probe(&[("DYLD_INSERT_LIBRARIES", shim)]);
    assert_eq!(
        loaded, stock,
        "the library changed an answer without being configured"
    );
}

/// The helper process of [`a_scope_process_child_stays_stock`]: run by it (under `capshim
/// run --scope process`), it creates the default device, prints whether it answers Apple9,
/// then starts `capshim probe --json` as a child and prints its output between markers.
#[test]
#[ignore = "a helper process of a_scope_process_child_stays_stock, run by it"]
fn scope_process_helper() {
    use objc2_metal::{MTLCreateSystemDefaultDevice, MTLDevice, MTLGPUFamily};
    let capshim = std::env::var_os("MACOS_NATIVE_HELPER_CAPSHIM").expect("run by the test");
    let device = MTLCreateSystemDefaultDevice().expect("no Metal device");
    println!(
        "parent.apple9={}",
        device.supportsFamily(MTLGPUFamily(1009))
    );
    let child = std::process::Command::new(capshim)
        .args(["probe", "--json"])
        .output()
        .unwrap();
    assert!(child.status.success(), "{child:?}");
    println!(
        "---child---\n{}\n---end---",
        String::from_utf8_lossy(&child.stdout)
    );
}

#[test]
fn a_scope_process_child_stays_stock() {
    real_shim();
    let stock = probe(&[]);
    let this_test = std::env::current_exe().unwrap();
    let out = capshim()
        .args([
            "run",
            "--require-active",
            "--scope",
            "process",
            "--profile",
            "apple9-64k",
            "--",
        ])
        .arg(this_test)
        .args([
            "--ignored",
            "--exact",
            "scope_process_helper",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("MACOS_NATIVE_HELPER_CAPSHIM", capshim_path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The parent is the process: hooked, it answers Apple9.
    assert!(stdout.contains("parent.apple9=true"), "{stdout}");
    let child = stdout
        .split("---child---\n")
        .nth(1)
        .and_then(|rest| rest.split("\n---end---").next())
        .unwrap_or_else(|| panic!("no child output in:\n{stdout}"));
    let child: Value = serde_json::from_str(child).unwrap();
    assert_eq!(
        child, stock,
        "a child under --scope process did not answer as stock"
    );
}

#[test]
fn the_simulated_guest_suites_are_linux_only() {
    let why = capshim_simguest::guest()
        .expect_err("the simulated guest is built on Linux only, yet it says it is built here");
    eprintln!(
        "note: run_simguest.rs (and the shim's simulated_guest) do not run here ({why}); this \
         file runs the shim in real processes on the real device instead"
    );
}
