//! libcapshim injected with LD_PRELOAD into a simulated macOS guest: a Metal library and a
//! probe written in Objective-C, running on GCC's GNU runtime (see crates/simguest).
//!
//! Every test runs the real probe as a separate process, with and without the shim, and
//! compares what the device answered.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use capshim_simguest::{BROKEN, PARAVIRTUAL, SECOND, SUB, guest, parse};

/// `target/<profile>/libcapshim.so`, built by cargo next to this test's `deps/` folder.
fn shim() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap();
    let so = dir.join("libcapshim.so");
    assert!(
        so.exists(),
        "{} is missing: build the shim with cargo build -p capshim",
        so.display()
    );
    // `cargo test` builds the crate as an rlib only: a library left from an earlier build
    // would test old code without saying so.
    let built = std::fs::metadata(&so).unwrap().modified().unwrap();
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    for source in [manifest.join("src"), manifest.join("../profile/src")] {
        let newest = newest_file(&source);
        assert!(
            newest <= built,
            "{} is older than the sources in {}: rebuild it with cargo build -p capshim",
            so.display(),
            source.display()
        );
    }
    so
}

fn newest_file(dir: &Path) -> std::time::SystemTime {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| {
            let path = entry.unwrap().path();
            if path.is_dir() {
                newest_file(&path)
            } else {
                std::fs::metadata(&path).unwrap().modified().unwrap()
            }
        })
        .max()
        .unwrap_or(std::time::UNIX_EPOCH)
}

struct Run {
    answers: BTreeMap<String, String>,
    stdout: String,
    stderr: String,
}

impl Run {
    fn get(&self, key: &str) -> &str {
        self.answers
            .get(key)
            .map(String::as_str)
            .unwrap_or_else(|| panic!("no {key} in:\n{}", self.stdout))
    }
    fn family(&self, class: &str, family: i64) -> bool {
        self.get(&format!("{class}.family.{family}")) == "true"
    }
    fn capshim_lines(&self) -> Vec<&str> {
        self.stderr
            .lines()
            .filter(|l| l.starts_with("capshim: "))
            .collect()
    }
}

fn run(probe: &Path, args: &[&str], env: &[(&str, &str)], preload: bool) -> Run {
    let mut cmd = Command::new(probe);
    cmd.args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default());
    if preload {
        cmd.env("LD_PRELOAD", shim());
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        out.status.success(),
        "probe failed: {}\n{stdout}\n{stderr}",
        out.status
    );
    Run {
        answers: parse(&stdout),
        stdout,
        stderr,
    }
}

fn probe(args: &[&str], env: &[(&str, &str)]) -> Run {
    run(&guest().unwrap().probe, args, env, true)
}

fn stock(args: &[&str]) -> Run {
    run(&guest().unwrap().probe, args, &[], false)
}

const UNLOCKED: &[(&str, &str)] = &[("CAPSHIM_APPLE_FAMILY_MAX", "1009")];
const ALL_FAMILIES: [i64; 19] = [
    1001, 1002, 1003, 1004, 1005, 1006, 1007, 1008, 1009, 1010, 2001, 2002, 3001, 3002, 3003, 4001,
    4002, 5001, 5002,
];

fn assert_same_answers(a: &Run, b: &Run, class: &str) {
    assert_same_families(a, b, class);
    let tg = format!("{class}.max_threadgroup_memory");
    assert_eq!(a.get(&tg), b.get(&tg));
}

#[test]
fn stock_guest_answers_as_the_paravirtual_device_does() {
    let s = stock(&[]);
    for family in ALL_FAMILIES {
        let expected = (1001..=1005).contains(&family) || (3001..=3003).contains(&family);
        assert_eq!(s.family(PARAVIRTUAL, family), expected, "family {family}");
    }
    assert_eq!(
        s.get("MTLParavirtualDevice.max_threadgroup_memory"),
        "32768"
    );
    assert_eq!(
        s.get("MTLParavirtualDevice.recommended_working_set_size"),
        "12009603072"
    );
    for flag in ["simdgroup_reduction", "simdgroup_mm", "bfloat", "tensor"] {
        assert_eq!(
            s.get(&format!("MTLParavirtualDevice.llama.{flag}")),
            "false",
            "{flag}"
        );
    }
}

#[test]
fn unlocked_profile_turns_on_llama_cpp_gates_and_raises_threadgroup_memory() {
    let u = probe(&[], UNLOCKED);
    for flag in ["simdgroup_reduction", "simdgroup_mm", "bfloat"] {
        assert_eq!(
            u.get(&format!("MTLParavirtualDevice.llama.{flag}")),
            "true",
            "{flag}"
        );
    }
    assert_eq!(u.get("MTLParavirtualDevice.llama.tensor"), "false");
    assert_eq!(
        u.get("MTLParavirtualDevice.max_threadgroup_memory"),
        "65536"
    );
    assert!((1001..=1009).all(|f| u.family(PARAVIRTUAL, f)));
    assert!(!u.family(PARAVIRTUAL, 1010));
    // The working set is left alone unless configured.
    assert_eq!(
        u.get("MTLParavirtualDevice.recommended_working_set_size"),
        "12009603072"
    );
    let lines = u.capshim_lines();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines[0].starts_with("capshim: active in probe (pid "),
        "{}",
        lines[0]
    );
    assert!(lines[0].ends_with(
        "apple_family_max=1009 (Apple9) max_threadgroup_memory=65536 recommended_working_set_size=unchanged scope=children"
    ));
    assert!(
        lines[1].starts_with("capshim: hooked MTLParavirtualDevice in probe (pid "),
        "{}",
        lines[1]
    );
}

#[test]
fn families_outside_the_apple_range_never_change() {
    let classes = ["--class", PARAVIRTUAL, "--class", SECOND, "--class", SUB];
    let s = stock(&classes);
    let u = probe(&classes, &[("CAPSHIM_APPLE_FAMILY_MAX", "1999")]);
    for class in [PARAVIRTUAL, SECOND, SUB] {
        for family in ALL_FAMILIES.iter().filter(|f| **f > 1999) {
            assert_eq!(
                u.family(class, *family),
                s.family(class, *family),
                "{class} {family}"
            );
        }
        assert!((1001..=1010).all(|f| u.family(class, f)), "{class}");
    }
    assert!(
        !u.family(PARAVIRTUAL, 5001),
        "Metal3 must stay false: MLX breaks on it"
    );
    assert!(
        u.family(SUB, 2002),
        "the subclass's own Mac2 answer is kept"
    );
}

#[test]
fn malformed_configuration_leaves_everything_stock_and_says_why() {
    let s = stock(&[]);
    let cases: &[(&[(&str, &str)], &str)] = &[
        (
            &[("CAPSHIM_APPLE_FAMILY_MAX", "+1009")],
            "CAPSHIM_APPLE_FAMILY_MAX=\"+1009\" is malformed",
        ),
        (
            &[("CAPSHIM_APPLE_FAMILY_MAX", "1009 ")],
            "CAPSHIM_APPLE_FAMILY_MAX=\"1009 \" is malformed",
        ),
        (&[("CAPSHIM_APPLE_FAMILY_MAX", "1009k")], "is malformed"),
        (
            &[("CAPSHIM_APPLE_FAMILY_MAX", "0x")],
            "0x must be followed by hex digits",
        ),
        (
            &[("CAPSHIM_APPLE_FAMILY_MAX", "99999999999999999999")],
            "does not fit in 64 bits",
        ),
        (
            &[("CAPSHIM_APPLE_FAMILY_MAX", "5001")],
            "outside 1001 (Apple1) to 1999",
        ),
        (
            &[("CAPSHIM_APPLE_FAMILY_MAX", "1000")],
            "outside 1001 (Apple1) to 1999",
        ),
        (
            &[
                ("CAPSHIM_APPLE_FAMILY_MAX", "1009"),
                ("CAPSHIM_MAX_THREADGROUP_MEMORY", "-1"),
            ],
            "CAPSHIM_MAX_THREADGROUP_MEMORY",
        ),
        (
            &[
                ("CAPSHIM_APPLE_FAMILY_MAX", "1009"),
                ("CAPSHIM_RECOMMENDED_WORKING_SET_SIZE", "16G"),
            ],
            "CAPSHIM_RECOMMENDED_WORKING_SET_SIZE",
        ),
        (
            &[
                ("CAPSHIM_APPLE_FAMILY_MAX", "1009"),
                ("CAPSHIM_SCOPE", "everything"),
            ],
            "CAPSHIM_SCOPE",
        ),
        (
            &[
                ("CAPSHIM_APPLE_FAMILY_MAX", "1009"),
                ("CAPSHIM_LOG", "loud"),
            ],
            "CAPSHIM_LOG",
        ),
        (
            &[("CAPSHIM_MAX_THREADGROUP_MEMORY", "65536")],
            "CAPSHIM_APPLE_FAMILY_MAX is not",
        ),
        (
            &[
                ("CAPSHIM_APPLE_FAMILY_MAX", "1009"),
                ("LUME_METAL_APPLE_FAMILY_MAX", "1007"),
            ],
            "disagree",
        ),
    ];
    for (env, why) in cases {
        let r = probe(&[], env);
        assert_same_answers(&r, &s, PARAVIRTUAL);
        let lines = r.capshim_lines();
        assert_eq!(lines.len(), 1, "{env:?}: {lines:?}");
        assert!(
            lines[0].starts_with("capshim: staying stock in probe (pid "),
            "{env:?}: {}",
            lines[0]
        );
        assert!(lines[0].contains(why), "{env:?}: {} lacks {why}", lines[0]);
    }
}

#[test]
fn an_unconfigured_shim_is_silent_and_stock() {
    let r = probe(&[], &[]);
    assert_same_answers(&r, &stock(&[]), PARAVIRTUAL);
    assert_eq!(r.capshim_lines(), Vec::<&str>::new());
}

#[test]
fn reference_shim_aliases_activate() {
    let r = probe(
        &[],
        &[
            ("LUME_METAL_APPLE_FAMILY_MAX", "1007"),
            ("LUME_METAL_MAX_THREADGROUP_MEMORY", "0x10000"),
        ],
    );
    assert!(r.family(PARAVIRTUAL, 1007) && !r.family(PARAVIRTUAL, 1008));
    assert_eq!(
        r.get("MTLParavirtualDevice.max_threadgroup_memory"),
        "65536"
    );
    let both = probe(
        &[],
        &[
            ("CAPSHIM_APPLE_FAMILY_MAX", "1007"),
            ("LUME_METAL_APPLE_FAMILY_MAX", "1007"),
        ],
    );
    assert!(both.family(PARAVIRTUAL, 1007));
}

#[test]
fn metal_loaded_late_with_dlopen_is_hooked() {
    let g = guest().unwrap();
    let r = run(&g.probe_dlopen, &[], UNLOCKED, true);
    assert_eq!(r.get("metal"), "dlopened");
    assert_eq!(r.get("MTLParavirtualDevice.llama.simdgroup_mm"), "true");
    assert_eq!(
        r.get("MTLParavirtualDevice.max_threadgroup_memory"),
        "65536"
    );
    assert!(
        r.stderr
            .contains("capshim: hooked MTLParavirtualDevice in probe-dlopen")
    );
}

#[test]
fn a_metal_without_the_private_hook_point_stays_stock_and_says_so() {
    let g = guest().unwrap();
    let dir = tempdir();
    let status = dir.join("status.jsonl");
    let metal = g.metal_without_hook_point.to_str().unwrap();
    let stock = run(&g.probe_dlopen, &[], &[("SIMGUEST_METAL", metal)], false);
    let r = run(
        &g.probe_dlopen,
        &[],
        &[
            ("SIMGUEST_METAL", metal),
            ("CAPSHIM_APPLE_FAMILY_MAX", "1009"),
            ("CAPSHIM_STATUS_FILE", status.to_str().unwrap()),
        ],
        true,
    );
    assert_same_answers(&r, &stock, PARAVIRTUAL);
    assert!(!r.family(PARAVIRTUAL, 1007));
    let lines = r.capshim_lines();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines[1].starts_with("capshim: hook failed on _MTLDevice in probe-dlopen (pid ")
            && lines[1].ends_with("): no method -initGPUFamilySupport; staying stock"),
        "{}",
        lines[1]
    );
    let events = events(&status);
    assert_eq!(events[1]["event"], "failed");
    assert_eq!(events[1]["class"], "_MTLDevice");
}

#[test]
fn a_process_that_never_loads_metal_is_configured_but_never_hooked() {
    let g = guest().unwrap();
    let dir = tempdir();
    let status = dir.join("status.jsonl");
    let r = run(
        &g.probe_dlopen,
        &["--no-metal"],
        &[
            ("CAPSHIM_APPLE_FAMILY_MAX", "1009"),
            ("CAPSHIM_STATUS_FILE", status.to_str().unwrap()),
        ],
        true,
    );
    assert_eq!(r.get("metal"), "not loaded");
    let events = events(&status);
    assert_eq!(
        events
            .iter()
            .map(|e| e["event"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["active"]
    );
    assert_eq!(
        r.capshim_lines().len(),
        1,
        "only the activation line: {}",
        r.stderr
    );
}

#[test]
fn each_class_keeps_its_own_originals() {
    // A threadgroup floor below the paravirtual device's own 32768 but above the second's 16384.
    let env = [
        ("CAPSHIM_APPLE_FAMILY_MAX", "1001"),
        ("CAPSHIM_MAX_THREADGROUP_MEMORY", "20000"),
    ];
    for order in [[PARAVIRTUAL, SECOND, SUB], [SUB, SECOND, PARAVIRTUAL]] {
        let args = [
            "--class", order[0], "--class", order[1], "--class", order[2],
        ];
        let r = probe(&args, &env);
        let s = stock(&args);
        assert_eq!(
            r.get("MTLParavirtualDevice.max_threadgroup_memory"),
            "32768",
            "{order:?}"
        );
        assert_eq!(
            r.get("MTLSimSubDevice.max_threadgroup_memory"),
            "32768",
            "{order:?}"
        );
        assert_eq!(
            r.get("MTLSimSecondDevice.max_threadgroup_memory"),
            "20000",
            "{order:?}"
        );
        for class in order {
            assert_same_families(&r, &s, class);
        }
        assert_eq!(
            r.capshim_lines()
                .iter()
                .filter(|l| l.contains("hooked"))
                .count(),
            3,
            "{order:?}"
        );
    }
}

fn assert_same_families(a: &Run, b: &Run, class: &str) {
    for family in ALL_FAMILIES {
        assert_eq!(
            a.family(class, family),
            b.family(class, family),
            "{class} family {family}"
        );
    }
}

#[test]
fn eight_threads_creating_two_kinds_of_device_all_get_the_right_answers() {
    for _ in 0..5 {
        let r = probe(
            &["--threads", "8", "--class", PARAVIRTUAL, "--class", SECOND],
            UNLOCKED,
        );
        for i in 0..8 {
            let (class, expected) = if i % 2 == 0 {
                (
                    PARAVIRTUAL,
                    "1001,1002,1003,1004,1005,1006,1007,1008,1009,3001,3002,3003, tg=65536",
                )
            } else {
                (
                    SECOND,
                    "1001,1002,1003,1004,1005,1006,1007,1008,1009,3001,3002, tg=65536",
                )
            };
            assert_eq!(r.get(&format!("thread.{i}.{class}")), expected);
        }
        let hooked: Vec<_> = r
            .capshim_lines()
            .into_iter()
            .filter(|l| l.contains("hooked"))
            .collect();
        assert_eq!(
            hooked.len(),
            2,
            "each class is hooked exactly once: {hooked:?}"
        );
    }
}

#[test]
fn first_use_of_related_classes_on_many_threads_never_lowers_an_answer() {
    // A subclass's original calls [super supportsFamily:] while another thread may be hooking
    // that superclass: the superclass's original must already be known then.
    let expected = [
        (
            SUB,
            "1001,1002,1003,1004,1005,1006,1007,1008,1009,2002,3001,3002,3003, tg=65536",
        ),
        (
            PARAVIRTUAL,
            "1001,1002,1003,1004,1005,1006,1007,1008,1009,3001,3002,3003, tg=65536",
        ),
        (
            SECOND,
            "1001,1002,1003,1004,1005,1006,1007,1008,1009,3001,3002, tg=65536",
        ),
        (
            BROKEN,
            "1001,1002,1003,1004,1005,1006,1007,1008,1009, tg=65536",
        ),
    ];
    let args = [
        "--threads",
        "64",
        "--class",
        SUB,
        "--class",
        PARAVIRTUAL,
        "--class",
        SECOND,
        "--class",
        BROKEN,
    ];
    for _ in 0..30 {
        let r = probe(&args, UNLOCKED);
        for i in 0..64 {
            let (class, answers) = expected[i % 4];
            assert_eq!(
                r.get(&format!("thread.{i}.{class}")),
                answers,
                "thread {i}\n{}",
                r.stderr
            );
        }
        assert!(!r.stderr.contains("no original"), "{}", r.stderr);
    }
}

#[test]
fn a_class_missing_a_method_stays_stock_and_others_still_hook() {
    let dir = tempdir();
    let status = dir.join("status.jsonl");
    let args = ["--class", BROKEN, "--class", PARAVIRTUAL];
    let env = [
        ("CAPSHIM_APPLE_FAMILY_MAX", "1009"),
        ("CAPSHIM_RECOMMENDED_WORKING_SET_SIZE", "17179869184"),
        ("CAPSHIM_STATUS_FILE", status.to_str().unwrap()),
    ];
    let r = probe(&args, &env);
    assert_same_answers(&r, &stock(&args), BROKEN);
    assert_eq!(
        r.get("MTLParavirtualDevice.recommended_working_set_size"),
        "17179869184"
    );
    assert!(r.family(PARAVIRTUAL, 1009));
    let events = events(&status);
    let failed = events
        .iter()
        .find(|e| e["event"] == "failed")
        .expect("a failed event");
    assert_eq!(failed["class"], BROKEN);
    assert_eq!(failed["reason"], "no method -recommendedMaxWorkingSetSize");
    assert!(
        r.stderr
            .contains("capshim: hook failed on MTLSimBrokenDevice")
    );
}

fn children(stdout: &str) -> Vec<BTreeMap<String, String>> {
    stdout.split("pid=").skip(1).map(parse).collect()
}

#[test]
fn scope_process_leaves_children_stock_and_keeps_other_preloads() {
    let g = guest().unwrap();
    let child = format!("{} --class {PARAVIRTUAL}", g.probe.display());
    let preload = format!("{} {}", shim().display(), g.metal.display());
    let mut env = vec![
        ("CAPSHIM_APPLE_FAMILY_MAX", "1009"),
        ("CAPSHIM_SCOPE", "process"),
        ("LD_PRELOAD", preload.as_str()),
    ];
    let r = run(&g.probe, &["--then", &child], &env, false);
    let runs = children(&r.stdout);
    assert_eq!(runs.len(), 2);
    assert_eq!(
        runs[0]["MTLParavirtualDevice.llama.simdgroup_mm"], "true",
        "the process itself is unlocked"
    );
    assert_eq!(
        runs[1]["MTLParavirtualDevice.llama.simdgroup_mm"], "false",
        "its child starts stock"
    );
    assert_eq!(runs[1]["env.LD_PRELOAD"], g.metal.display().to_string());
    assert_eq!(runs[1]["env.CAPSHIM_APPLE_FAMILY_MAX"], "(unset)");

    env.retain(|(k, _)| *k != "CAPSHIM_SCOPE");
    let r = run(&g.probe, &["--then", &child], &env, false);
    let runs = children(&r.stdout);
    assert_eq!(
        runs[1]["MTLParavirtualDevice.llama.simdgroup_mm"], "true",
        "by default children inherit"
    );
}

#[test]
fn only_process_matches_the_executable_name() {
    let r = probe(
        &[],
        &[
            ("CAPSHIM_APPLE_FAMILY_MAX", "1009"),
            ("CAPSHIM_ONLY_PROCESS", "probe"),
        ],
    );
    assert!(r.family(PARAVIRTUAL, 1009));
    let r = probe(
        &[],
        &[
            ("CAPSHIM_APPLE_FAMILY_MAX", "1009"),
            ("CAPSHIM_ONLY_PROCESS", "llama-bench"),
        ],
    );
    assert!(!r.family(PARAVIRTUAL, 1009));
    assert!(
        r.stderr
            .contains("CAPSHIM_ONLY_PROCESS=\"llama-bench\" does not match this process (probe)"),
        "{}",
        r.stderr
    );
}

#[test]
fn only_process_also_matches_the_name_a_symlink_started_it_as() {
    let dir = tempdir();
    let link = dir.join("probe-link");
    std::os::unix::fs::symlink(guest().unwrap().probe, &link).unwrap();
    for name in ["probe-link", "probe"] {
        let r = run(
            &link,
            &[],
            &[
                ("CAPSHIM_APPLE_FAMILY_MAX", "1009"),
                ("CAPSHIM_ONLY_PROCESS", name),
            ],
            true,
        );
        assert!(r.family(PARAVIRTUAL, 1009), "{name}: {}", r.stderr);
    }
    // A value that would break the one-line message is shown escaped.
    let r = probe(
        &[],
        &[
            ("CAPSHIM_APPLE_FAMILY_MAX", "1009"),
            ("CAPSHIM_ONLY_PROCESS", "probe\ncapshim: hooked X"),
        ],
    );
    assert!(!r.family(PARAVIRTUAL, 1009));
    assert_eq!(r.capshim_lines().len(), 1, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("CAPSHIM_ONLY_PROCESS=\"probe\\ncapshim: hooked X\""),
        "{}",
        r.stderr
    );
}

#[test]
fn a_status_file_nobody_reads_from_never_blocks_the_process() {
    let dir = tempdir();
    let fifo = dir.join("fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let mut child = Command::new(guest().unwrap().probe)
        .env_clear()
        .env("LD_PRELOAD", shim())
        .env("CAPSHIM_APPLE_FAMILY_MAX", "1009")
        .env("CAPSHIM_STATUS_FILE", &fifo)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Bounded wait: a blocked open would keep the probe alive.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            panic!("the probe blocked on a FIFO status file");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(parse(&stdout)["MTLParavirtualDevice.family.1009"], "true");
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot append to CAPSHIM_STATUS_FILE"));
}

#[test]
fn the_status_file_records_activation_from_every_process() {
    let g = guest().unwrap();
    let dir = tempdir();
    let status = dir.join("status.jsonl");
    let child = format!("{} --class {SECOND}", g.probe.display());
    let env = [
        ("CAPSHIM_APPLE_FAMILY_MAX", "1009"),
        ("CAPSHIM_STATUS_FILE", status.to_str().unwrap()),
    ];
    let r = probe(&["--then", &child], &env);
    assert_eq!(children(&r.stdout).len(), 2);
    let all = events(&status);
    // system() runs the child through /bin/sh, which inherits the shim too but never
    // creates a device: it is configured ("active") and never hooked.
    let (events, shell): (Vec<_>, Vec<_>) = all.into_iter().partition(|e| e["process"] == "probe");
    assert!(
        !shell.is_empty() && shell.iter().all(|e| e["event"] == "active"),
        "{shell:?}"
    );
    let kinds: Vec<(&str, &str)> = events
        .iter()
        .map(|e| {
            (
                e["event"].as_str().unwrap(),
                e["class"].as_str().unwrap_or("-"),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("active", "-"),
            ("hooked", PARAVIRTUAL),
            ("active", "-"),
            ("hooked", SECOND)
        ]
    );
    assert_ne!(events[0]["pid"], events[2]["pid"]);
    assert_eq!(events[1]["process"], "probe");
    assert_eq!(events[1]["profile"]["apple_family_max"], 1009);
    assert_eq!(events[1]["profile"]["max_threadgroup_memory"], 65536);
    assert!(events[1]["profile"]["recommended_working_set_size"].is_null());
}

#[test]
fn a_refused_configuration_is_recorded_in_the_status_file() {
    let dir = tempdir();
    let status = dir.join("status.jsonl");
    probe(
        &[],
        &[
            ("CAPSHIM_APPLE_FAMILY_MAX", "Apple9"),
            ("CAPSHIM_STATUS_FILE", status.to_str().unwrap()),
        ],
    );
    let events = events(&status);
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["event"], "inactive");
    assert!(
        events[0]["reason"]
            .as_str()
            .unwrap()
            .contains("CAPSHIM_APPLE_FAMILY_MAX=\"Apple9\"")
    );
}

#[test]
fn an_unwritable_status_file_does_not_hurt_the_process() {
    let r = probe(
        &[],
        &[
            ("CAPSHIM_APPLE_FAMILY_MAX", "1009"),
            ("CAPSHIM_STATUS_FILE", "/nonexistent/dir/status.jsonl"),
        ],
    );
    assert!(r.family(PARAVIRTUAL, 1009));
    assert_eq!(
        r.stderr
            .matches("cannot append to CAPSHIM_STATUS_FILE")
            .count(),
        1,
        "{}",
        r.stderr
    );
}

#[test]
fn query_logging_is_bounded_per_distinct_query_and_off_is_silent() {
    let r = probe(
        &[],
        &[
            ("CAPSHIM_APPLE_FAMILY_MAX", "1009"),
            ("CAPSHIM_LOG", "queries"),
        ],
    );
    let queries: Vec<_> = r
        .capshim_lines()
        .into_iter()
        .filter(|l| l.starts_with("capshim: query "))
        .collect();
    // 19 families asked (Apple6, Apple7, Metal3, Metal4 twice) and threadgroup memory once.
    assert_eq!(queries.len(), 20, "{queries:#?}");
    assert!(queries.contains(
        &"capshim: query MTLParavirtualDevice supportsFamily:1007 original=false returned=true"
    ));
    assert!(queries.contains(
        &"capshim: query MTLParavirtualDevice supportsFamily:5001 original=false returned=false"
    ));
    assert!(queries.contains(&"capshim: query MTLParavirtualDevice maxThreadgroupMemoryLength original=32768 returned=65536"));
    let quiet = probe(
        &[],
        &[("CAPSHIM_APPLE_FAMILY_MAX", "1009"), ("CAPSHIM_LOG", "off")],
    );
    assert_eq!(quiet.stderr, "");
    assert!(quiet.family(PARAVIRTUAL, 1009));
}

fn events(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

fn tempdir() -> PathBuf {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "capshim-test-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
