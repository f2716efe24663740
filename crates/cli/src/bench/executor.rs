//! One llama-bench process: its environment (the shim only in unlocked arms), its output
//! files, its exit status, and whether the shim activated; the result is a [`RunRecord`],
//! and a failed run goes to the experiment layer's one rule ([`Context::failed`]).

use std::path::Path;

use super::environment::{Round, RunRecord};
use super::plan::{ArmPlan, Plan};
use crate::experiment::error::NotActivated;
use crate::experiment::record::Process;
use crate::experiment::tool::{Failure, ToolRun, what_to_check};
use crate::experiment::{Context, ExperimentError, io, space};
use crate::launch::status::StatusEvent;
use crate::llama::{Activation, closing, read_bench_file};

/// Runs llama-bench once for `arm` in `round`: its JSON, its stderr and the shim's status
/// file (unlocked arms) go to the three paths of `files`, relative to the bundle directory
/// `dir`. Returns its record and, when it failed and `--keep-going` recorded it, why.
///
/// # Errors
/// When llama-bench cannot start or fails (without `--keep-going`), its output is unreadable,
/// a signal stopped it, or an unlocked arm's shim did not activate (without `allow_inactive`).
pub fn run_one(
    plan: &Plan,
    arm: &ArmPlan,
    round: u32,
    args: &[String],
    dir: &Path,
    (json_rel, stderr_rel, status_rel): (&str, &str, Option<&str>),
    cx: &mut Context,
) -> Result<(RunRecord, Option<String>), ExperimentError> {
    let json_path = dir.join(json_rel);
    let stderr_path = dir.join(stderr_rel);
    let status_path = status_rel.map(|r| dir.join(r));
    if let Some(p) = &status_path {
        std::fs::write(p, "").map_err(io("cannot create", p))?;
    }
    let env = arm.env_change_from(
        plan.dylib.as_deref(),
        status_path.as_deref().unwrap_or(Path::new("")),
        std::env::vars_os(),
    );
    let run = ToolRun {
        tool: "llama-bench",
        program: &plan.llama_bench,
        args,
        env: &env,
        stdout: &json_path,
        stderr: &stderr_path,
    };
    let finished = cx.run_tool(&run)?;
    let mut record = Process::new(&arm.name, Round { round }, run.argv(), env, &finished);
    let what = format!("arm {} round {round}", arm.name);
    // A run fails when llama-bench exits non-zero or is killed, or when its output is cut
    // short (exit status 0 alone does not say it ran to its end: llama::closing).
    let failed = if finished.status.success() {
        let json = std::fs::read_to_string(&json_path).unwrap_or_default();
        closing::bench_json(&json)
            .and_then(|()| {
                read_bench_file(&json_path)
                    .map(drop)
                    .map_err(|e| e.to_string())
            })
            .err()
    } else {
        Some(finished.status.to_string())
    };
    // Output cut short by a full disk is not a tool that printed nothing: say which.
    let failed = failed.map(|reason| space::cut_short_by_full_disk(&json_path).unwrap_or(reason));
    if let Some(reason) = failed {
        cx.failed(Failure {
            tool: "llama-bench",
            arm: arm.name.clone(),
            what,
            reason: reason.clone(),
            stderr: stderr_path,
            stdout: None,
        })?;
        record.failed = Some(reason.clone());
        return Ok((record, Some(reason)));
    }
    if let (Some(_), Some(path)) = (&arm.profile, &status_path) {
        let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
        let events = StatusEvent::read_file(path)?;
        let activation = Activation::from_evidence(true, &events, &stderr);
        if !activation.activated && !plan.allow_inactive {
            let said = if activation.stderr_lines.is_empty() {
                "it printed no `capshim:` line on stderr".to_string()
            } else {
                format!("it said: {}", activation.stderr_lines.join(" | "))
            };
            return Err(ExperimentError::NotActivated(Box::new(NotActivated {
                what,
                status_file: path.clone(),
                stderr_file: stderr_path,
                said,
                check: what_to_check(&activation, plan.dylib.as_deref()),
            })));
        }
    }
    Ok((record, None))
}
