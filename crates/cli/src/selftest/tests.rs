//! The selftest's checks from injected evidence: what is checked for a profile, the kernels'
//! outputs against the CPU, statuses, fixes, the exit code and the bundle.

use std::cell::RefCell;

use capshim_profile::Profile;
use capshim_profile::device::Answers;

use super::kernels::{Kernel, KernelRun, KernelRuns, RUNS_FORMAT, RunError, to_hex};
use super::reference::correct_output;
use super::*;
use crate::bundle::BundleError;
use crate::experiment::ExperimentError;

fn active(pid: u32, family: i64, tg: u64) -> String {
    format!(
        r#"{{"pid":{pid},"process":"probe","event":"active","reason":null,"class":null,"profile":{{"apple_family_max":{family},"max_threadgroup_memory":{tg},"recommended_working_set_size":null}}}}"#
    )
}

fn hooked(pid: u32) -> String {
    format!(
        r#"{{"pid":{pid},"process":"probe","event":"hooked","reason":null,"class":"AppleParavirtDevice","profile":null}}"#
    )
}

fn status(family: i64, tg: u64) -> String {
    format!("{}\n{}\n", active(7, family, tg), hooked(7))
}

fn apple9_64k() -> Profile {
    Profile::new(1009, 65536, None).unwrap()
}

fn process(status: String, stdout: String) -> ProcessRecord {
    ProcessRecord {
        argv: vec!["/p/probe".into()],
        exit_code: Some(0),
        time_ms: 12.5,
        status,
        stdout,
        stderr: String::new(),
    }
}

/// A GPU that answers from a function of the kernel, and remembers what it was asked.
struct FakeGpu {
    asked: RefCell<Vec<(Vec<Kernel>, u64)>>,
    answer: fn(Kernel, u64) -> KernelRun,
    status: String,
}

impl Gpu for FakeGpu {
    fn run(&self, kernels: &[Kernel], threadgroup_bytes: u64) -> anyhow::Result<Kernels> {
        self.asked
            .borrow_mut()
            .push((kernels.to_vec(), threadgroup_bytes));
        let runs = KernelRuns {
            format: RUNS_FORMAT,
            threadgroup_bytes,
            runs: kernels
                .iter()
                .map(|&k| (self.answer)(k, threadgroup_bytes))
                .collect(),
        };
        Ok(Kernels::Ran(process(
            self.status.clone(),
            serde_json::to_string(&runs).unwrap(),
        )))
    }
}

fn correct(kernel: Kernel, bytes: u64) -> KernelRun {
    KernelRun {
        kernel,
        time_ms: 3.25,
        output_hex: Some(to_hex(&correct_output(kernel, bytes))),
        simd_width: Some(32),
        device: Some("Apple Paravirtual device".into()),
        error: None,
    }
}

/// A GPU with 32768 bytes of threadgroup memory: the 64 KiB kernel does not compile.
fn small_threadgroup_memory(kernel: Kernel, bytes: u64) -> KernelRun {
    if kernel == Kernel::ThreadgroupMemory && bytes > 32768 {
        return KernelRun {
            output_hex: None,
            error: Some(RunError {
                stage: "compile".into(),
                message: "threadgroup memory size exceeds the maximum".into(),
            }),
            ..correct(kernel, bytes)
        };
    }
    correct(kernel, bytes)
}

/// A GPU whose simd_sum is wrong in one thread.
fn wrong_simd_sum(kernel: Kernel, bytes: u64) -> KernelRun {
    let mut run = correct(kernel, bytes);
    if kernel == Kernel::SimdReduction {
        let mut out = correct_output(kernel, bytes);
        out[0..4].copy_from_slice(&1234f32.to_le_bytes());
        run.output_hex = Some(to_hex(&out));
    }
    run
}

fn evidence(name: &str, profile: &Profile, probe: Probe, kernels: Option<Kernels>) -> Evidence {
    Evidence {
        capshim_version: "0.1.0".into(),
        os: "macos".into(),
        profile: ProfileRecord::new(name, profile, "test"),
        stock: Answers::paravirtual_stock(),
        stock_source: "the stock paravirtual device's answers".into(),
        probe,
        kernels,
    }
}

fn statuses(report: &Report) -> Vec<(&str, &str)> {
    report
        .checks
        .iter()
        .map(|c| (c.check.id.as_str(), c.check.status.word()))
        .collect()
}

fn run(profile: &Profile, name: &str, answer: fn(Kernel, u64) -> KernelRun) -> Report {
    let gpu = FakeGpu {
        asked: RefCell::new(Vec::new()),
        answer,
        status: status(profile.apple_family_max, profile.max_threadgroup_memory),
    };
    let stock = Answers::paravirtual_stock();
    let kernels = run_claimed(&gpu, profile, &stock).unwrap();
    let probe = Probe::Ran(process(
        status(profile.apple_family_max, profile.max_threadgroup_memory),
        String::new(),
    ));
    evaluate(&evidence(name, profile, probe, kernels)).unwrap()
}

#[test]
fn what_a_profile_claims_beyond_the_stock_guest() {
    let stock = Answers::paravirtual_stock();
    let claimed = |p: Profile| claimed_kernels(&p, &stock);
    assert_eq!(claimed(apple9_64k()), Kernel::ALL.to_vec());
    // native on an M1: Apple7, and the 32768 bytes the guest already answers.
    let m1 = Profile::new(1007, 32768, None).unwrap();
    assert_eq!(
        claimed(m1),
        vec![
            Kernel::SimdReduction,
            Kernel::SimdgroupMatrix,
            Kernel::Bfloat
        ]
    );
    // Apple6 turns on llama.cpp's bfloat only.
    let apple6 = Profile::new(1006, 32768, None).unwrap();
    assert_eq!(claimed(apple6), vec![Kernel::Bfloat]);
    // A device that already answers Apple7 claims nothing more for the SIMD-group gates.
    let apple7_device = stock.with_profile(&m1);
    let c = claims(&apple9_64k(), &apple7_device);
    assert!(!c[0].claimed);
    assert!(c[0].why.contains("already answers Apple7"), "{}", c[0].why);
    assert!(c[3].claimed, "64 KiB is still beyond the device's 32768");
}

#[test]
fn the_gpu_is_asked_only_for_claimed_kernels_with_the_shims_threadgroup_answer() {
    let gpu = FakeGpu {
        asked: RefCell::new(Vec::new()),
        answer: correct,
        status: status(1007, 32768),
    };
    let stock = Answers::paravirtual_stock();
    let m1 = Profile::new(1007, 32768, None).unwrap();
    run_claimed(&gpu, &m1, &stock).unwrap();
    run_claimed(&gpu, &apple9_64k(), &stock).unwrap();
    let asked = gpu.asked.borrow();
    assert_eq!(asked[0].0.len(), 3);
    assert_eq!(asked[0].1, 32768);
    assert_eq!(asked[1], (Kernel::ALL.to_vec(), 65536));
    let stock_profile = Profile::new(1005, 0, None).unwrap();
    assert!(run_claimed(&gpu, &stock_profile, &stock).unwrap().is_none());
}

#[test]
fn every_claim_holding_exits_0_with_times() {
    let report = run(&apple9_64k(), "apple9-64k", correct);
    assert_eq!(report.exit_code, 0);
    assert!(
        statuses(&report).iter().all(|(_, s)| *s == "ok"),
        "{:?}",
        statuses(&report)
    );
    assert_eq!(report.checks[0].time_ms, Some(12.5));
    assert_eq!(report.checks[1].time_ms, Some(3.25));
    assert_eq!(
        report.checks[0].check.summary,
        "hooked AppleParavirtDevice in probe (pid 7)"
    );
    // doctor's keys, in doctor's order, then the time.
    let json = serde_json::to_string(&report.checks[0]).unwrap();
    let at = |key: &str| json.find(&format!("\"{key}\":")).unwrap();
    let keys = ["id", "status", "summary", "detail", "fix", "time_ms"];
    assert!(keys.windows(2).all(|w| at(w[0]) < at(w[1])), "{json}");
    assert!(
        json.starts_with(r#"{"id":"activation","status":"ok""#),
        "{json}"
    );
}

#[test]
fn a_kernel_metal_refuses_fails_with_exit_5_and_the_fix() {
    let report = run(&apple9_64k(), "apple9-64k", small_threadgroup_memory);
    assert_eq!(report.exit_code, EXIT_CLAIM_FAILED);
    let tg = &report.checks[4];
    assert_eq!(tg.check.id, "kernel.threadgroup_memory");
    assert_eq!(tg.check.status, Status::Fail);
    assert_eq!(
        tg.check.summary,
        "compile failed: threadgroup memory size exceeds the maximum"
    );
    assert_eq!(
        tg.check.fix.as_deref(),
        Some(
            "use --profile native (the host chip's own answers), or --threadgroup-memory 32768 (the device's own answer)"
        )
    );
    let text = render::text(&report, false);
    assert!(
        text.contains("fail  kernel.threadgroup_memory  compile failed: threadgroup memory size exceeds the maximum (3.2 ms) -- fix: use --profile native"),
        "{text}"
    );
    assert!(
        text.ends_with("4 ok, 1 fail, 0 skip: a claim does not hold (--verbose for the details)\n"),
        "{text}"
    );
}

#[test]
fn a_wrong_result_fails_with_a_lower_family_as_the_fix() {
    let m1 = Profile::new(1007, 32768, None).unwrap();
    let report = run(&m1, "native", wrong_simd_sum);
    assert_eq!(report.exit_code, EXIT_CLAIM_FAILED);
    let simd = &report.checks[1];
    assert_eq!(simd.check.status, Status::Fail);
    assert!(
        simd.check
            .summary
            .starts_with("1 of 1024 threads differ from the CPU; thread 0: sum 1234"),
        "{}",
        simd.check.summary
    );
    // native is already the chip's own answer: only a lower family is left.
    assert_eq!(
        simd.check.fix.as_deref(),
        Some(
            "a lower family: --family-max 1006 (Apple6), which does not claim SIMD-group reduction (simd_sum, simd_max)"
        )
    );
    assert_eq!(report.checks[4].check.status, Status::Skip);
    assert!(
        report.checks[4]
            .check
            .summary
            .starts_with("not claimed beyond stock")
    );
}

#[test]
fn without_a_metal_device_kernels_skip_and_the_activation_still_counts() {
    let probe = Probe::Ran(process(status(1009, 65536), String::new()));
    let e = evidence(
        "apple9-64k",
        &apple9_64k(),
        probe,
        Some(Kernels::NoDevice("no Metal device (this is linux)".into())),
    );
    let report = evaluate(&e).unwrap();
    assert_eq!(report.exit_code, 0);
    assert_eq!(statuses(&report)[0], ("activation", "ok"));
    for c in &report.checks[1..] {
        assert_eq!(c.check.status, Status::Skip);
        assert_eq!(c.check.summary, "not run: no Metal device (this is linux)");
        assert_eq!(c.time_ms, None);
    }
    let skipped = evidence(
        "apple9-64k",
        &apple9_64k(),
        Probe::Skipped("no probe".into()),
        None,
    );
    let report = evaluate(&skipped).unwrap();
    assert_eq!(report.checks[0].check.summary, "not checked: no probe");
    assert_eq!(report.counts.skip, 5);
    assert_eq!(report.exit_code, 0);
    // Exit 0, but the last line does not read as a pass.
    assert!(
        render::text(&report, false)
            .contains("0 ok, 0 fail, 5 skip: nothing was checked, so no claim is shown to hold"),
        "{}",
        render::text(&report, false)
    );
}

#[test]
fn a_shim_that_did_not_activate_or_applied_other_values_fails() {
    let inactive = format!("{}\n", active(7, 1009, 65536));
    let e = evidence(
        "apple9-64k",
        &apple9_64k(),
        Probe::Ran(process(inactive, String::new())),
        Some(Kernels::NoDevice("no Metal device".into())),
    );
    let report = evaluate(&e).unwrap();
    assert_eq!(report.exit_code, EXIT_CLAIM_FAILED);
    let a = &report.checks[0].check;
    assert_eq!(
        a.summary,
        "not activated: probe (pid 7): configuration accepted but no Metal device was created"
    );
    assert_eq!(
        a.fix.as_deref(),
        Some("`capshim doctor -- /p/probe` shows what stops the shim")
    );

    let other = Probe::Ran(process(status(1007, 32768), String::new()));
    let report = evaluate(&evidence("apple9-64k", &apple9_64k(), other, None)).unwrap();
    assert!(
        report.checks[0]
            .check
            .summary
            .contains("applied other values than the profile's"),
        "{}",
        report.checks[0].check.summary
    );

    // The kernel process without the shim: its results say nothing about the claims.
    let gpu = FakeGpu {
        asked: RefCell::new(Vec::new()),
        answer: correct,
        status: String::new(),
    };
    let kernels = run_claimed(&gpu, &apple9_64k(), &Answers::paravirtual_stock()).unwrap();
    let probe = Probe::Ran(process(status(1009, 65536), String::new()));
    let report = evaluate(&evidence("apple9-64k", &apple9_64k(), probe, kernels)).unwrap();
    assert_eq!(report.exit_code, EXIT_CLAIM_FAILED);
    assert!(
        report.checks[1].check.summary.starts_with(
            "the kernel process did not run with the profile: not activated: the shim did not load"
        ),
        "{}",
        report.checks[1].check.summary
    );
}

#[test]
fn a_kernel_process_that_printed_nothing_fails_every_claimed_kernel() {
    let mut p = process(status(1009, 65536), String::new());
    p.exit_code = None;
    let probe = Probe::Ran(process(status(1009, 65536), String::new()));
    let report = evaluate(&evidence(
        "apple9-64k",
        &apple9_64k(),
        probe,
        Some(Kernels::Ran(p)),
    ))
    .unwrap();
    assert_eq!(report.counts.fail, 4);
    assert!(
        report.checks[2]
            .check
            .summary
            .starts_with("the kernel process (killed by a signal) reported no result"),
        "{}",
        report.checks[2].check.summary
    );
}

#[test]
fn a_bundle_is_written_checked_and_its_derived_files_re_derived() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("b");
    let gpu = FakeGpu {
        asked: RefCell::new(Vec::new()),
        answer: small_threadgroup_memory,
        status: status(1009, 65536),
    };
    let stock = Answers::paravirtual_stock();
    let kernels = run_claimed(&gpu, &apple9_64k(), &stock).unwrap();
    let probe = Probe::Ran(process(status(1009, 65536), "pid=7\n".into()));
    let e = evidence("apple9-64k", &apple9_64k(), probe, kernels);
    let report = evaluate(&e).unwrap();
    let machine = bundle::Machine {
        os_name: Some("macOS".into()),
        ..bundle::Machine::default()
    };
    let with = bundle::Written {
        started: 0,
        machine: &machine,
        dylib: None,
        probe: None,
        injection_variable: "DYLD_INSERT_LIBRARIES",
    };
    bundle::write(&dir, &e, &report, &with).unwrap();
    assert!(matches!(
        bundle::write(&dir, &e, &report, &with),
        Err(ExperimentError::Bundle(BundleError::Exists(_)))
    ));
    assert_eq!(bundle::read(&dir).unwrap(), e);
    let (markdown, json) = bundle::check(&dir).unwrap();
    assert!(
        markdown.contains("fail  kernel.threadgroup_memory"),
        "{markdown}"
    );
    assert_eq!(json, serde_json::to_string_pretty(&report).unwrap() + "\n");
    crate::bundle::verify(&dir).unwrap();
    let header = crate::bundle::schema::read_header(&dir).unwrap();
    assert_eq!(header.kind, crate::bundle::schema::Kind::Selftest);
    assert_eq!(header.schema_version, Some(bundle::SCHEMA_VERSION));

    // A raw output changed (the failing kernel made to pass) and the sums regenerated: the
    // checks derived again no longer match checks.json.
    let runs_path = dir.join(bundle::KERNELS_JSON);
    let mut runs: KernelRuns =
        serde_json::from_str(&std::fs::read_to_string(&runs_path).unwrap()).unwrap();
    runs.runs[3] = correct(Kernel::ThreadgroupMemory, 65536);
    std::fs::write(&runs_path, serde_json::to_string(&runs).unwrap()).unwrap();
    std::fs::remove_file(dir.join("SHA256SUMS")).unwrap();
    crate::bundle::write_sums(&dir).unwrap();
    let err = bundle::check(&dir).unwrap_err();
    assert!(
        matches!(
            err,
            BundleError::Mismatch {
                file: "checks.json",
                ..
            }
        ),
        "{err}"
    );
    assert!(err.untrusted());
}
