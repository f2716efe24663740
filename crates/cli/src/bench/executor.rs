//! One llama-bench process: its environment (the shim only in unlocked arms), its output
//! files, the signals passed on to it, its exit status and stderr tail, and whether the shim
//! activated; the result is a [`RunRecord`].

use std::path::Path;

use super::environment::RunRecord;
use super::error::{RunError, io};
use super::incomplete::interrupted;
use super::plan::{ArmPlan, Plan};
use crate::bundle::incomplete::Progress;
use crate::bundle::time;
use crate::launch::child::{self, ChildError};
use crate::launch::signals::Forwarder;
use crate::launch::status::StatusEvent;
use crate::llama::{Activation, read_bench_file};

/// Runs llama-bench once for `arm` in `round`: its JSON, its stderr and the shim's status
/// file (unlocked arms) go to the three paths of `files`, relative to the bundle directory
/// `dir`. `progress` is told when the process ended, before its result is checked.
///
/// # Errors
/// When llama-bench cannot start or fails, its output is unreadable, a signal stopped it,
/// or an unlocked arm's shim did not activate (without `allow_inactive`).
#[allow(clippy::too_many_arguments)]
pub fn run_one(
    plan: &Plan,
    arm: &ArmPlan,
    round: u32,
    args: &[String],
    dir: &Path,
    (json_rel, stderr_rel, status_rel): (&str, &str, Option<&str>),
    signals: &Forwarder,
    progress: &mut Progress,
) -> Result<RunRecord, RunError> {
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
    let mut argv = vec![plan.llama_bench.display().to_string()];
    argv.extend(args.iter().cloned());
    let finished = child::run(
        &plan.llama_bench,
        args,
        &env,
        &json_path,
        &stderr_path,
        signals,
    )
    .map_err(|e| match e {
        ChildError::Create { path, source } => io("cannot create", &path)(source),
        ChildError::Spawn { program, source } => RunError::Spawn {
            path: program,
            source,
        },
        ChildError::Wait { program, source } => io("cannot wait for llama-bench", &program)(source),
        // Whatever llama-bench did with the signal, the run was cut short.
        ChildError::Interrupted(number) => interrupted(number),
    })?;
    progress.ended();
    let (status, started) = (finished.status, finished.started);
    let seconds = finished.seconds;
    let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    if !status.success() {
        let tail: Vec<&str> = stderr.lines().rev().take(8).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(RunError::LlamaFailed {
            arm: arm.name.clone(),
            round,
            status: status.to_string(),
            stderr: stderr_path,
            tail: tail.join("\n  "),
        });
    }
    read_bench_file(&json_path)?;
    if let (Some(_), Some(path)) = (&arm.profile, &status_path) {
        let events = StatusEvent::read_file(path)?;
        let activation = Activation::from_evidence(true, &events, &stderr);
        if !activation.activated && !plan.allow_inactive {
            let said = if activation.stderr_lines.is_empty() {
                "it printed no `capshim:` line on stderr".to_string()
            } else {
                format!("it said: {}", activation.stderr_lines.join(" | "))
            };
            return Err(RunError::NotActivated {
                arm: arm.name.clone(),
                round,
                status_file: path.clone(),
                stderr_file: stderr_path,
                said,
                check: activation.what_to_check(
                    crate::launch::Os::current().injection_var(),
                    &plan
                        .dylib
                        .as_deref()
                        .map(|d| d.display().to_string())
                        .unwrap_or_default(),
                ),
            });
        }
    }
    Ok(RunRecord {
        arm: arm.name.clone(),
        round,
        command_line: child::command_line(&env, &argv),
        argv,
        env,
        exit_code: status.code(),
        seconds,
        started_utc: time::iso(started),
    })
}
