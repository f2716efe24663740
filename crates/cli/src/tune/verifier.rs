//! A candidate checked against the reference with verify's checks (KL divergence, top-1
//! agreement, perplexity, greedy text, and the Metal kernels where the build has them): `capshim
//! verify` run as a child process, the same executable, into a verify bundle inside the tune
//! bundle (`verify-<label>`), with signals passed on to it as to any tool. Its verdict is read
//! back from that bundle's `summary.json` ([`super::derive::verify_result`]).

use std::path::Path;

use serde::Serialize;

use super::manifest::VerifyRecord;
use super::plan::Plan;
use crate::arms::STOCK;
use crate::bench::command;
use crate::experiment::record::Process;
use crate::experiment::tool::{Failure, ToolRun};
use crate::experiment::{Context, ExperimentError};
use crate::launch::environment::EnvChange;

/// Where in a tune a verify process ran: the candidate it checked.
#[derive(Clone, Debug, Serialize)]
pub struct VerifyOf {
    /// The candidate's label.
    pub verify: String,
}

/// What `environment.json` records of a verify process.
pub type VerifyProcess = Process<VerifyOf>;

/// `capshim verify`'s arguments for checking a candidate, run as the arm `spec`, against the
/// reference, into `out`.
pub fn verify_args(plan: &Plan, spec: &str, out: &Path) -> Vec<String> {
    let v = &plan.verify;
    let mut args = vec![
        "verify".to_string(),
        "-m".to_string(),
        plan.bench.model.display().to_string(),
        "--llama-dir".to_string(),
        v.llama_dir.display().to_string(),
    ];
    if !v.kernel_tests {
        args.push("--no-kernel-tests".to_string());
    }
    args.extend(v.shim_args.iter().cloned());
    let reference = &plan.reference.arm.name;
    // verify always runs stock: a stock reference is that arm, not one more.
    if reference != STOCK {
        args.extend([
            "--arm".to_string(),
            format!("{reference}={}", plan.reference.items),
        ]);
    }
    args.extend([
        "--arm".to_string(),
        spec.to_string(),
        "--reference".to_string(),
        reference.clone(),
        "-o".to_string(),
        out.display().to_string(),
    ]);
    args
}

/// Verifies the candidate `label` (its arm `spec`) against the reference into the tune bundle
/// `dir` (absolute): its record for the manifest and the process's for `environment.json`.
///
/// # Errors
/// A signal ([`ExperimentError::Interrupted`]; verify leaves its own bundle unfinished), or
/// verify failing without leaving a verdict, without `--keep-going`.
pub fn verify(
    plan: &Plan,
    label: &str,
    spec: &str,
    dir: &Path,
    cx: &mut Context,
) -> Result<(VerifyRecord, VerifyProcess), ExperimentError> {
    let rel = format!("verify-{label}");
    let (stdout, stderr) = (
        dir.join(format!("raw/verify-{label}.stdout")),
        dir.join(format!("raw/verify-{label}.stderr")),
    );
    let args = verify_args(plan, spec, &dir.join(&rel));
    let env = EnvChange::default();
    let run = ToolRun {
        tool: "capshim verify",
        program: &plan.verify.capshim,
        args: &args,
        env: &env,
        stdout: &stdout,
        stderr: &stderr,
    };
    cx.progress.start(format!("verify of {label} ({rel})"));
    let finished = cx.run_tool(&run)?;
    let process = Process::new(
        label,
        VerifyOf {
            verify: label.to_string(),
        },
        run.argv(),
        env,
        &finished,
    );
    let record = VerifyRecord {
        label: label.to_string(),
        bundle: rel.clone(),
        check: false,
        exit_code: finished.status.code(),
    };
    // Exit 0 (equivalent) and 5 (different) leave a verdict; so may exit 1 (an arm not run).
    let sealed = dir.join(&rel).join(crate::bundle::SUMS_FILE).is_file();
    if sealed {
        cx.progress.finish();
    } else {
        cx.failed(Failure {
            tool: "capshim verify",
            arm: label.to_string(),
            what: format!("verify of {label}"),
            reason: format!("{}, its bundle {rel} left unsealed", finished.status),
            stderr,
            stdout: None,
        })?;
    }
    Ok((record, process))
}

/// Runs `--check` (`check`, a shell command) once with the candidate's arm `arm` (its shim,
/// variables and `command-args`, as its rounds ran), its output to `raw/check-<label>.stdout`
/// and `.stderr`: exit 0 means its results are right (`passed`), anything else `failed`.
///
/// # Errors
/// When the shell cannot start or a signal stopped it.
pub fn check(
    plan: &Plan,
    check: &str,
    arm: &crate::arms::Arm,
    dir: &Path,
    cx: &mut Context,
) -> Result<(VerifyRecord, VerifyProcess), ExperimentError> {
    let label = &arm.name;
    let rel = format!("raw/check-{label}.stdout");
    let stderr = dir.join(format!("raw/check-{label}.stderr"));
    let status = arm
        .profile
        .is_some()
        .then(|| dir.join(format!("raw/check-{label}.status.jsonl")));
    if let Some(p) = &status {
        std::fs::write(p, "").map_err(crate::experiment::io("cannot create", p))?;
    }
    let mut env = arm.env_change_from(
        plan.bench.dylib.as_deref(),
        status.as_deref().unwrap_or(Path::new("")),
        std::env::vars_os(),
    );
    let args = vec!["-c".to_string(), command::run::script(check, arm, &mut env)];
    let run = ToolRun {
        tool: "the --check command",
        program: Path::new(command::run::SHELL),
        args: &args,
        env: &env,
        stdout: &dir.join(&rel),
        stderr: &stderr,
    };
    cx.progress.start(format!("--check of {label} ({rel})"));
    let finished = cx.run_tool_in_group(&run)?;
    cx.progress.finish();
    let process = Process::new(
        label,
        VerifyOf {
            verify: label.to_string(),
        },
        run.argv(),
        env,
        &finished,
    );
    Ok((
        VerifyRecord {
            label: label.to_string(),
            bundle: rel,
            check: true,
            exit_code: finished.status.code(),
        },
        process,
    ))
}
