//! Runs a verify plan: the reference arm first (it saves the base), then every other arm, each
//! through its steps (llama-perplexity, llama-completion, test-backend-ops) with the shim
//! injected only into arms with a profile; then seals the bundle. A failure or a signal leaves
//! the bundle unsealed with an INCOMPLETE note.

use std::path::{Path, PathBuf};

use super::derive::{StepResult, read_step};
use super::error::{VerifyError, io};
use super::incomplete::{Progress, interrupted, write_incomplete};
use super::manifest::{ManifestArm, Step, StepFiles};
use super::plan::{BUILTIN_TEXT, Plan, Reference, Text};
use super::record::StepRecord;
use super::seal::{Outcome, Prepared, seal, write_sidecar};
use crate::bundle::{self, RAW_DIR, time};
use crate::launch::child::{self, ChildError};
use crate::launch::signals::Forwarder;

/// Runs the plan and writes the bundle.
///
/// # Errors
/// When a tool cannot start, fails or prints no result, the reference's shim did not activate,
/// a signal stops the run, or the bundle cannot be written. Raw files written so far stay in
/// the bundle directory, which the error names.
pub fn run(plan: &Plan) -> Result<Outcome, VerifyError> {
    let started = time::now();
    // Before anything else: a signal from now on stops the run cleanly.
    let signals = Forwarder::start_with(true)
        .map_err(io("cannot catch signals for", Path::new("capshim verify")))?;
    let prepared = Prepared::new(plan, &|| signals.received())?;
    if let Some(number) = signals.received() {
        return Err(interrupted(number));
    }
    let dir = bundle::create_named(plan.output.as_deref(), "capshim-verify")?;
    let mut progress = Progress::default();
    run_in(plan, &prepared, &dir, started, &signals, &mut progress).map_err(|e| {
        let removed = progress
            .partial_base
            .as_ref()
            .filter(|p| std::fs::remove_file(p).is_ok());
        let _ = write_incomplete(&dir, &progress, &e, removed.map(PathBuf::as_path));
        VerifyError::Stopped {
            dir: dir.clone(),
            source: Box::new(e),
        }
    })
}

fn run_in(
    plan: &Plan,
    prepared: &Prepared,
    dir: &Path,
    started: u64,
    signals: &Forwarder,
    progress: &mut Progress,
) -> Result<Outcome, VerifyError> {
    let dir = std::fs::canonicalize(dir).map_err(io("cannot resolve", dir))?;
    let work = tempfile::Builder::new()
        .prefix("capshim-verify-")
        .tempdir()
        .map_err(io(
            "cannot create a temporary directory in",
            &std::env::temp_dir(),
        ))?;
    let text = match &plan.text {
        Text::File(path) => path.clone(),
        Text::Builtin => {
            let path = work.path().join("verify-text.txt");
            std::fs::write(&path, BUILTIN_TEXT).map_err(io("cannot write", &path))?;
            path
        }
    };
    let base_path = match (&plan.reference, &plan.save_base) {
        (Reference::Base { path, .. }, _) => path.clone(),
        (Reference::Arm(_), Some(path)) => path.clone(),
        (Reference::Arm(_), None) => work.path().join("base.kld"),
    };
    let mut manifest = prepared.manifest(plan, &dir)?;
    let steps: Vec<Step> = [Step::Perplexity, Step::Greedy]
        .into_iter()
        .chain(plan.kernels.as_ref().map(|_| Step::Kernels))
        .collect();
    let order = plan.order();
    progress.work.total = (order.len() * steps.len()) as u64;
    let mut records = Vec::new();
    let inherited: Vec<String> = std::env::vars_os()
        .map(|(k, _)| k.to_string_lossy().into_owned())
        .collect();
    for &index in &order {
        let arm = &plan.arms[index];
        let is_reference = matches!(plan.reference, Reference::Arm(i) if i == index);
        manifest.arms.push(ManifestArm {
            name: arm.name.clone(),
            profile: arm.profile_name.clone(),
            shim: arm.profile.is_some(),
            env: arm.env.clone(),
            steps: Vec::new(),
        });
        for &step in &steps {
            if let Some(number) = signals.received() {
                return Err(interrupted(number));
            }
            let stem = format!("{RAW_DIR}/{}-{}", arm.name, step.name());
            let files = StepFiles {
                step,
                stdout: format!("{stem}.stdout"),
                stderr: format!("{stem}.stderr"),
                status: arm
                    .profile
                    .is_some()
                    .then(|| format!("{stem}.status.jsonl")),
            };
            let status_path = files.status.as_ref().map(|s| dir.join(s));
            if let Some(p) = &status_path {
                std::fs::write(p, "").map_err(io("cannot create", p))?;
            }
            let env = arm.env_change(
                plan.dylib.as_deref(),
                status_path.as_deref().unwrap_or(Path::new("")),
                inherited.iter().cloned(),
            );
            let (tool, args) = match step {
                Step::Perplexity => {
                    if is_reference && plan.save_base.is_some() {
                        progress.partial_base = Some(base_path.clone());
                    }
                    (
                        plan.tools.perplexity.clone(),
                        plan.perplexity_args(is_reference, &text, &base_path),
                    )
                }
                Step::Greedy => (plan.tools.completion.clone(), plan.greedy_args()),
                Step::Kernels => (
                    plan.tools
                        .backend_ops
                        .clone()
                        .expect("kernel tests planned"),
                    plan.kernel_args(plan.kernels.as_ref().expect("kernel tests planned")),
                ),
            };
            let label = format!("arm {}: {} ({})", arm.name, step.tool(), files.stdout);
            eprintln!(
                "capshim: verify: {label} [{}/{}]",
                progress.work.finished.len() + 1,
                progress.work.total
            );
            progress.work.start(label.clone());
            let mut argv = vec![tool.display().to_string()];
            argv.extend(args.iter().cloned());
            let finished = child::run(
                &tool,
                &args,
                &env,
                &dir.join(&files.stdout),
                &dir.join(&files.stderr),
                signals,
            )
            .map_err(|e| match e {
                ChildError::Create { path, source } => io("cannot create", &path)(source),
                ChildError::Spawn { program, source } => VerifyError::Spawn {
                    tool: step.tool(),
                    path: program,
                    source,
                },
                ChildError::Wait { program, source } => io("cannot wait for", &program)(source),
                ChildError::Interrupted(number) => interrupted(number),
            })?;
            progress.work.ended();
            records.push(StepRecord {
                arm: arm.name.clone(),
                step,
                command_line: child::command_line(&env, &argv),
                argv,
                env,
                exit_code: finished.status.code(),
                seconds: finished.seconds,
                started_utc: time::iso(finished.started),
            });
            // test-backend-ops exits 1 when a test failed: a result, read below.
            let result_exit = finished.status.success()
                || (step == Step::Kernels && finished.status.code() == Some(1));
            if !result_exit {
                return Err(failed(
                    &dir,
                    &files,
                    arm.name.clone(),
                    step,
                    finished.status,
                ));
            }
            let marm = manifest.arms.last_mut().expect("pushed above");
            marm.steps.push(files.clone());
            let marm = manifest.arms.last().expect("pushed above");
            let result: StepResult = read_step(&dir, &manifest, marm, &files)?;
            progress.work.finish();
            if let Some(why) = result.inactive(step).filter(|_| !plan.allow_inactive) {
                if is_reference {
                    return Err(VerifyError::ReferenceInactive {
                        arm: arm.name.clone(),
                        why,
                        check: result
                            .activation
                            .as_ref()
                            .map(|a| {
                                a.what_to_check(
                                    crate::launch::Os::current().injection_var(),
                                    &plan
                                        .dylib
                                        .as_deref()
                                        .map(|d| d.display().to_string())
                                        .unwrap_or_default(),
                                )
                            })
                            .unwrap_or_default(),
                    });
                }
                eprintln!(
                    "capshim: verify: arm {} is not run further: {why}",
                    arm.name
                );
                progress.work.total -= (steps.len() - marm.steps.len()) as u64;
                break;
            }
        }
        if is_reference && let Some(path) = &plan.save_base {
            let record = write_sidecar(plan, prepared, &dir, &manifest, path)?;
            progress.partial_base = None;
            manifest.base = Some(record);
        }
    }
    if let Some(number) = signals.received() {
        return Err(interrupted(number));
    }
    drop(work);
    seal(plan, prepared, &dir, started, &manifest, &records)
}

/// The error for a tool that exited without a result.
fn failed(
    dir: &Path,
    files: &StepFiles,
    arm: String,
    step: Step,
    status: std::process::ExitStatus,
) -> VerifyError {
    let stderr_path = dir.join(&files.stderr);
    let stderr = std::fs::read(&stderr_path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let tail: Vec<&str> = stderr.lines().rev().take(8).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    VerifyError::ToolFailed {
        tool: step.tool(),
        arm,
        status: status.to_string(),
        stderr: stderr_path,
        tail: if tail.is_empty() {
            "(nothing)".to_string()
        } else {
            tail.join("\n  ")
        },
    }
}
