//! `capshim run` against the real shim (`target/<profile>/libcapshim.so`, found by the
//! default lookup "next to the capshim executable") injected into the simulated macOS
//! guest of `crates/simguest` (a Metal library and probe in Objective-C on GCC's runtime).
//!
//! Needs the shim built: `cargo test --workspace` builds it; alone, run
//! `cargo build -p capshim` first.
//!
//! Linux only: the simulated guest is built with GCC's Objective-C runtime. On a Mac,
//! `tests/macos_native.rs` runs the shim in real processes on the real device,
//! and a test there says that this suite did not run.
#![cfg(target_os = "linux")]

mod common;

use std::collections::BTreeMap;

use assert_cmd::Command;
use capshim_simguest::{guest, parse};
use common::real_shim;
use predicates::prelude::*;

/// `capshim`, once the real shim it finds next to itself is known to be built.
fn capshim() -> Command {
    real_shim();
    common::capshim()
}

fn probe() -> String {
    guest().unwrap().probe.display().to_string()
}

struct Outcome {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Outcome {
    /// The answers of each probe process, in the order they printed (a child's follow).
    fn runs(&self) -> Vec<BTreeMap<String, String>> {
        self.stdout
            .split("pid=")
            .skip(1)
            .map(|chunk| parse(&format!("pid={chunk}")))
            .collect()
    }
    fn answers(&self) -> BTreeMap<String, String> {
        self.runs()
            .into_iter()
            .next()
            .expect("the probe printed nothing")
    }
    /// capshim's own summary line (the last `capshim: ` line on stderr).
    fn summary(&self) -> &str {
        self.stderr
            .lines()
            .rfind(|l| {
                l.starts_with("capshim: activated") || l.starts_with("capshim: not activated")
            })
            .unwrap_or_else(|| panic!("no summary line in:\n{}", self.stderr))
    }
}

fn run(args: &[&str]) -> Outcome {
    let out = capshim().arg("run").args(args).output().unwrap();
    Outcome {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

const PV: &str = capshim_simguest::PARAVIRTUAL;

#[test]
fn unlocked_and_stock_answers_differ_as_explain_predicts() {
    let p = probe();
    let stock = run(&["--profile", "stock", "--", &p]);
    assert_eq!(stock.code, 0, "{}", stock.stderr);
    let s = stock.answers();
    assert_eq!(s[&format!("{PV}.llama.simdgroup_mm")], "false");
    assert_eq!(s[&format!("{PV}.max_threadgroup_memory")], "32768");
    assert_eq!(s["env.LD_PRELOAD"], "(unset)");
    assert!(
        !stock.stderr.contains("capshim: active"),
        "{}",
        stock.stderr
    );

    let unlocked = run(&["--require-active", "--", &p]);
    assert_eq!(unlocked.code, 0, "{}", unlocked.stderr);
    let u = unlocked.answers();
    for flag in ["simdgroup_reduction", "simdgroup_mm", "bfloat"] {
        assert_eq!(u[&format!("{PV}.llama.{flag}")], "true", "{flag}");
    }
    assert_eq!(u[&format!("{PV}.llama.tensor")], "false");
    assert_eq!(u[&format!("{PV}.family.1009")], "true");
    assert_eq!(u[&format!("{PV}.family.1010")], "false");
    assert_eq!(
        u[&format!("{PV}.family.5001")],
        "false",
        "Metal3 never changes"
    );
    assert_eq!(u[&format!("{PV}.max_threadgroup_memory")], "65536");
    assert_eq!(u["env.LD_PRELOAD"], real_shim().display().to_string());
    assert!(
        unlocked
            .stderr
            .contains(&format!("capshim: hooked {PV} in probe (pid ")),
        "{}",
        unlocked.stderr
    );
    let pid = &u["pid"];
    assert_eq!(
        unlocked.summary(),
        format!("capshim: activated: hooked {PV} in probe (pid {pid})")
    );
}

#[test]
fn host_profile_claims_only_the_host_chips_families() {
    let out = run(&["--cpu-brand", "Apple M1 Ultra (Virtual)", "--", &probe()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let a = out.answers();
    assert_eq!(a[&format!("{PV}.family.1007")], "true");
    assert_eq!(a[&format!("{PV}.family.1008")], "false");
    assert_eq!(a[&format!("{PV}.max_threadgroup_memory")], "32768");
    assert_eq!(a[&format!("{PV}.llama.simdgroup_mm")], "true");
    assert_eq!(a["env.CAPSHIM_APPLE_FAMILY_MAX"], "1007");
}

#[test]
fn children_inherit_by_default_and_the_summary_names_every_process() {
    let p = probe();
    let out = run(&["--", &p, "--then", &p]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let runs = out.runs();
    assert_eq!(runs.len(), 2);
    for r in &runs {
        assert_eq!(r[&format!("{PV}.llama.simdgroup_mm")], "true");
    }
    let summary = out.summary();
    for r in &runs {
        assert!(
            summary.contains(&format!("hooked {PV} in probe (pid {})", r["pid"])),
            "{summary}"
        );
    }
    // system() runs the child through /bin/sh (dash here): configured, never a device.
    assert!(
        summary.contains("; stayed stock: ")
            && summary.contains("configuration accepted but no Metal device was created"),
        "{summary}"
    );
}

#[test]
fn scope_process_leaves_the_child_stock_and_keeps_other_preloads() {
    let g = guest().unwrap();
    let p = g.probe.display().to_string();
    let out = capshim()
        .env("LD_PRELOAD", &g.metal)
        .args(["run", "--scope", "process", "--", &p, "--then", &p])
        .output()
        .unwrap();
    let out = Outcome {
        code: out.status.code().unwrap(),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    };
    assert_eq!(out.code, 0, "{}", out.stderr);
    let runs = out.runs();
    assert_eq!(runs.len(), 2);
    assert_eq!(
        runs[0][&format!("{PV}.llama.simdgroup_mm")],
        "true",
        "the process itself is unlocked"
    );
    // The shim keeps itself in the variable until it has hooked a device (so that a same-pid
    // re-exec keeps it), then takes itself out, keeping the preload that was there before
    // `capshim run` put it last (where glibc runs its constructor first).
    assert!(
        runs[0]["env.LD_PRELOAD"].starts_with(&g.metal.display().to_string())
            && runs[0]["env.LD_PRELOAD"].ends_with("libcapshim.so"),
        "{}",
        runs[0]["env.LD_PRELOAD"]
    );
    assert_eq!(
        runs[1][&format!("{PV}.llama.simdgroup_mm")],
        "false",
        "its child starts stock"
    );
    assert_eq!(runs[1]["env.LD_PRELOAD"], g.metal.display().to_string());
    assert_eq!(runs[1]["env.CAPSHIM_APPLE_FAMILY_MAX"], "(unset)");
    assert_eq!(
        out.summary(),
        format!(
            "capshim: activated: hooked {PV} in probe (pid {})",
            runs[0]["pid"]
        )
    );
}

#[test]
fn require_active_exits_4_when_no_device_is_created() {
    let out = run(&["--require-active", "--", "/bin/true"]);
    assert_eq!(out.code, 4, "{}", out.stderr);
    assert!(
        out.summary()
            .starts_with("capshim: not activated: true (pid ")
            && out
                .summary()
                .ends_with("configuration accepted but no Metal device was created"),
        "{}",
        out.summary()
    );
    // Without --require-active the command's own status comes back.
    assert_eq!(run(&["--", "/bin/true"]).code, 0);

    let late = guest().unwrap().probe_dlopen.display().to_string();
    let out = run(&["--require-active", "--", &late, "--no-metal"]);
    assert_eq!(out.code, 4, "{}", out.stderr);
    assert!(
        out.summary().contains("no Metal device was created"),
        "{}",
        out.summary()
    );
    let out = run(&["--require-active", "--", &late]);
    assert_eq!(
        out.code, 0,
        "Metal loaded late with dlopen is still hooked: {}",
        out.stderr
    );
}

#[test]
fn only_process_names_why_another_process_stayed_stock() {
    let p = probe();
    let out = run(&[
        "--only-process",
        "llama-bench",
        "--require-active",
        "--",
        &p,
    ]);
    assert_eq!(out.code, 4, "{}", out.stderr);
    assert_eq!(out.answers()[&format!("{PV}.llama.simdgroup_mm")], "false");
    assert!(
        out.summary()
            .contains("CAPSHIM_ONLY_PROCESS=\"llama-bench\" does not match this process (probe)"),
        "{}",
        out.summary()
    );
    // Without a name: the command's own name.
    let out = run(&["--only-process", "--require-active", "--", &p]);
    assert_eq!(out.code, 0, "{}", out.stderr);
}

#[test]
fn log_queries_shows_original_and_returned_answers() {
    let out = run(&["--log", "queries", "--", &probe()]);
    assert_eq!(out.code, 0);
    let capshim_lines = out
        .stderr
        .lines()
        .filter(|l| l.starts_with("capshim: "))
        .count();
    assert!(capshim_lines > 5, "{}", out.stderr);
}

#[test]
fn exit_status_and_summary_survive_a_failing_workload() {
    let p = probe();
    capshim()
        .args(["run", "--", "sh", "-c", &format!("{p} >/dev/null; exit 9")])
        .assert()
        .code(9)
        .stderr(predicate::str::contains(format!(
            "capshim: activated: hooked {PV} in probe (pid "
        )));
}

#[test]
fn an_inherited_capshim_under_another_name_is_dropped_so_the_shim_hooks_once() {
    // A shell that exported an older build under another name: known by its version record.
    let dir = tempfile::tempdir().unwrap();
    let old = dir.path().join("old-libcapshim.so");
    std::fs::copy(real_shim(), &old).unwrap();
    let g = guest().unwrap();
    let inherited = format!("{}:{}", g.metal.display(), old.display());
    let out = capshim()
        .env("LD_PRELOAD", &inherited)
        .args(["run", "--require-active", "--"])
        .arg(&g.probe)
        .output()
        .unwrap();
    let out = Outcome {
        code: out.status.code().unwrap(),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    };
    assert_eq!(out.code, 0, "{}", out.stderr);
    let a = out.answers();
    assert_eq!(a[&format!("{PV}.llama.simdgroup_mm")], "true");
    assert_eq!(
        out.summary(),
        format!(
            "capshim: activated: hooked {PV} in probe (pid {})",
            a["pid"]
        )
    );
    // The other preload stays, before the shim: glibc runs the last preload's constructor
    // first, so the shim's runs before the other's, as dyld runs the first inserted library's
    // initializer first (where capshim puts the shim on macOS).
    assert_eq!(
        a["env.LD_PRELOAD"],
        format!("{}:{}", g.metal.display(), real_shim().display())
    );
}

#[test]
fn a_flooded_status_file_is_read_in_bounded_memory_and_activation_still_found() {
    // A process of the workload appends 128 MiB to the status file (one line of NULs, then
    // lines that are not events) before the probe hooks. capshim's data segment is limited
    // to 32 MiB (RLIMIT_DATA: heap and private mappings), a quarter of the file: reading the
    // file whole would fail there; read as a stream it needs far less.
    let p = probe();
    let flood = format!(
        "{{ head -c 100663296 /dev/zero; echo; yes 'not an event' | head -c 33554432; }} \
         >> \"$CAPSHIM_STATUS_FILE\"; exec {p}"
    );
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(r#"ulimit -d 32768 && exec "$@""#)
        .arg("sh")
        .arg(assert_cmd::cargo::cargo_bin("capshim"))
        .args(["run", "--require-active", "--", "sh", "-c", &flood])
        .env_remove("LD_PRELOAD")
        .env_remove("CAPSHIM_LOG")
        .output()
        .unwrap();
    real_shim();
    let out = Outcome {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    assert_eq!(out.code, 0, "{}", out.stderr);
    let summary = out.summary();
    assert!(
        summary.starts_with(&format!("capshim: activated: hooked {PV} in ")),
        "{summary}"
    );
    // Every flooded line was read and counted (about 2.6 million).
    let ignored: usize = summary
        .rsplit_once(" (")
        .and_then(|(_, tail)| tail.strip_suffix(" unreadable status line(s) ignored)"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{summary}"));
    assert!(ignored > 2_500_000, "{summary}");
}
