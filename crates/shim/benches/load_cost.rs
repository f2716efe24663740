//! What libcapshim costs a process that never creates a Metal device: starts a trivial program
//! (`/bin/true`) many times with nothing preloaded, with an empty preloaded library, and with
//! libcapshim preloaded unconfigured and configured (plain, `CAPSHIM_SCOPE=process`, and an
//! `CAPSHIM_ONLY_PROCESS` that does not match), and prints the time per start of each.
//!
//! `cargo bench -p capshim --bench load_cost` (Linux). It builds the release libcapshim with
//! cargo (or takes `CAPSHIM_LOAD_COST_SHIM=path`) and the empty library with `cc`.
//! `CAPSHIM_LOAD_COST_BEFORE=path` adds two arms with another build of the library (unconfigured
//! and configured), to compare two builds under the same load. `CAPSHIM_LOAD_COST_STARTS`
//! (default 300) is the starts per arm; they run in rounds of 20,
//! the arms in a rotating order within each round, so that a machine whose load drifts spreads
//! the drift over every arm. The figures are in docs/shim.md ("What it costs").
//!
//! A benchmark, not a test: it asserts nothing about time.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const PROGRAM: &str = "/bin/true";
const ROUND: usize = 20;

struct Arm {
    name: &'static str,
    preload: Option<PathBuf>,
    vars: Vec<(&'static str, &'static str)>,
    /// Per-start time of each round.
    rounds: Vec<Duration>,
}

fn main() {
    if !cfg!(target_os = "linux") {
        eprintln!("load_cost: Linux only (it preloads with LD_PRELOAD)");
        return;
    }
    // `cargo bench` passes `--bench`; a filter argument is not used.
    let starts: usize = std::env::var("CAPSHIM_LOAD_COST_STARTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300)
        .max(ROUND);
    let shim = std::env::var_os("CAPSHIM_LOAD_COST_SHIM")
        .map(PathBuf::from)
        .unwrap_or_else(build_shim);
    let work = std::env::temp_dir().join(format!("capshim-load-cost-{}", std::process::id()));
    std::fs::create_dir_all(&work).expect("a temporary directory");
    let empty = build_empty(&work);
    let configured = vec![("CAPSHIM_APPLE_FAMILY_MAX", "1009")];
    let mut arms = vec![
        arm("nothing preloaded", None, vec![]),
        arm("empty library", Some(empty), vec![]),
        arm("libcapshim, unconfigured", Some(shim.clone()), vec![]),
        arm(
            "libcapshim, configured",
            Some(shim.clone()),
            configured.clone(),
        ),
        arm(
            "libcapshim, configured, scope=process",
            Some(shim.clone()),
            vec![
                ("CAPSHIM_APPLE_FAMILY_MAX", "1009"),
                ("CAPSHIM_SCOPE", "process"),
            ],
        ),
        arm(
            "libcapshim, configured, only-process=llama-bench",
            Some(shim.clone()),
            vec![
                ("CAPSHIM_APPLE_FAMILY_MAX", "1009"),
                ("CAPSHIM_ONLY_PROCESS", "llama-bench"),
            ],
        ),
    ];
    // Another build to compare in the same rounds (e.g. the previous release's library).
    if let Some(before) = std::env::var_os("CAPSHIM_LOAD_COST_BEFORE").map(PathBuf::from) {
        arms.push(arm(
            "before: libcapshim, unconfigured",
            Some(before.clone()),
            vec![],
        ));
        arms.push(arm(
            "before: libcapshim, configured",
            Some(before),
            configured.clone(),
        ));
    }
    let rounds = starts / ROUND;
    for round in 0..rounds {
        let count = arms.len();
        for k in 0..count {
            let arm = &mut arms[(round + k) % count];
            let per_start = run(arm, ROUND);
            arm.rounds.push(per_start);
        }
    }
    let _ = std::fs::remove_dir_all(&work);
    println!(
        "{} starts of {PROGRAM} per arm ({rounds} rounds of {ROUND}); shim {}",
        rounds * ROUND,
        shim.display()
    );
    let median = |arm: &Arm| {
        let mut r = arm.rounds.clone();
        r.sort();
        r[r.len() / 2]
    };
    let empty = median(&arms[1]);
    println!("{:<52} {:>10} {:>9}", "arm", "ms/start", "vs empty");
    for arm in &arms {
        let m = median(arm);
        println!(
            "{:<52} {:>10.3} {:>8.2}x",
            arm.name,
            m.as_secs_f64() * 1e3,
            m.as_secs_f64() / empty.as_secs_f64()
        );
    }
    println!("(median over rounds of the mean time per start)");
}

fn arm(
    name: &'static str,
    preload: Option<PathBuf>,
    vars: Vec<(&'static str, &'static str)>,
) -> Arm {
    Arm {
        name,
        preload,
        vars,
        rounds: Vec::new(),
    }
}

/// Starts the program `n` times, one after another; the mean time per start.
fn run(arm: &Arm, n: usize) -> Duration {
    let start = Instant::now();
    for _ in 0..n {
        let mut command = Command::new(PROGRAM);
        command
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some(library) = &arm.preload {
            command.env("LD_PRELOAD", library);
        }
        for (name, value) in &arm.vars {
            command.env(name, value);
        }
        let status = command.status().expect("starting /bin/true");
        assert!(status.success(), "{PROGRAM} failed under {}", arm.name);
    }
    start.elapsed() / n as u32
}

/// `target/release/libcapshim.so`, built now with cargo (the release profile the dist uses).
fn build_shim() -> PathBuf {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let status = Command::new(cargo)
        .args(["build", "--quiet", "--release", "-p", "capshim"])
        .current_dir(manifest)
        .status()
        .expect("running cargo to build the release libcapshim");
    assert!(status.success(), "cargo build --release -p capshim failed");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| manifest.join("../../target"));
    let so = target.join("release/libcapshim.so");
    assert!(so.exists(), "{} was not built", so.display());
    so
}

/// An empty shared library: the cost of preloading anything at all.
fn build_empty(dir: &Path) -> PathBuf {
    let source = dir.join("empty.c");
    std::fs::write(&source, "/* nothing */\nint capshim_load_cost_empty;\n")
        .expect("writing empty.c");
    let so = dir.join("libempty.so");
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-O2", "-o"])
        .arg(&so)
        .arg(&source)
        .status()
        .expect("running cc");
    assert!(status.success(), "cc could not build the empty library");
    so
}
