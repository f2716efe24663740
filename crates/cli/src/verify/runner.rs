//! The verify experiment on the experiment layer: the reference arm first (it saves the base),
//! then every other arm, each through its steps (llama-perplexity, llama-completion,
//! test-backend-ops) with the shim injected only into arms with a profile; then the seal. A
//! failure or a signal leaves the bundle unsealed with an INCOMPLETE note (and removes a
//! half-written base).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::derive::{StepResult, read_step};
use super::manifest::{ManifestArm, Step, StepFiles};
use super::plan::{BUILTIN_TEXT, Plan, Reference, Text};
use super::record::{StepAt, StepRecord};
use super::seal::{Outcome, Prepared, seal, write_sidecar};
use crate::bundle::RAW_DIR;
use crate::experiment::record::Process;
use crate::experiment::tool::{Failure, ToolRun, what_to_check};
use crate::experiment::{self, Context, Experiment, ExperimentError, Words, io, space};
use crate::llama::closing;

/// How verify speaks of itself.
pub const WORDS: Words = Words {
    command: "verify",
    unit: "step",
    running: "the running llama.cpp tool",
    tool_option: "--llama-dir",
    fix: "the model, the llama.cpp arguments after `--`",
    prefix: "capshim-verify",
};

/// A verify run of a [`Plan`].
struct Verify<'a> {
    plan: &'a Plan,
    /// The files, identified before the bundle exists.
    prepared: Option<Prepared>,
    /// A base being written with `--save-base` whose description is not written yet: removed
    /// when the run stops, so that no half-written base is left to be compared with.
    partial_base: Option<PathBuf>,
}

/// Runs the plan and writes the bundle.
///
/// # Errors
/// When a tool cannot start, fails (without `--keep-going`) or prints no result, the
/// reference's shim did not activate, a signal stops the run, or the bundle cannot be written.
/// Raw files written so far stay in the bundle directory, which the error names.
pub fn run(plan: &Plan) -> Result<Outcome, ExperimentError> {
    experiment::run(&mut Verify {
        plan,
        prepared: None,
        partial_base: None,
    })
}

impl Experiment for Verify<'_> {
    type Sealed = Outcome;

    fn words(&self) -> Words {
        WORDS
    }

    fn derived(&self) -> &'static [&'static str] {
        &["summary.json", "report.md"]
    }

    fn output(&self) -> Option<&Path> {
        self.plan.output.as_deref()
    }

    fn keep_going(&self) -> bool {
        self.plan.keep_going
    }

    fn before(&mut self, stop: &dyn Fn() -> Option<i32>) -> Result<(), ExperimentError> {
        self.prepared = Some(Prepared::new(self.plan, stop)?);
        Ok(())
    }

    fn run_in(&mut self, dir: &Path, cx: &mut Context) -> Result<Outcome, ExperimentError> {
        let prepared = self.prepared.take().expect("prepared before the bundle");
        run_in(self.plan, &prepared, dir, cx, &mut self.partial_base)
    }

    fn on_stop(&mut self) -> Option<String> {
        let removed = self
            .partial_base
            .take()
            .filter(|p| std::fs::remove_file(p).is_ok())?;
        Some(format!(
            "The base being saved, {}, was incomplete and has been removed.",
            removed.display()
        ))
    }
}

fn run_in(
    plan: &Plan,
    prepared: &Prepared,
    dir: &Path,
    cx: &mut Context,
    partial_base: &mut Option<PathBuf>,
) -> Result<Outcome, ExperimentError> {
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
    cx.progress.total = (order.len() * steps.len()) as u64;
    let mut records: Vec<StepRecord> = Vec::new();
    // capshim's own environment, names and values: an arm keeps the user's other injected
    // libraries, as bench's arms and `run` do (Arm::env_change_from).
    let parent: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    for &index in &order {
        let arm = &plan.arms[index];
        let is_reference = matches!(plan.reference, Reference::Arm(i) if i == index);
        manifest.arms.push(ManifestArm {
            name: arm.name.clone(),
            profile: arm.profile_name.clone(),
            shim: arm.profile.is_some(),
            env: arm.env.clone(),
            args: arm.args.common.clone(),
            steps: Vec::new(),
        });
        for &step in &steps {
            cx.check_signals()?;
            let stem = format!("{RAW_DIR}/{}-{}", arm.name, step.name());
            let files = StepFiles {
                step,
                stdout: format!("{stem}.stdout"),
                stderr: format!("{stem}.stderr"),
                status: arm
                    .profile
                    .is_some()
                    .then(|| format!("{stem}.status.jsonl")),
                failed: None,
            };
            let status_path = files.status.as_ref().map(|s| dir.join(s));
            if let Some(p) = &status_path {
                std::fs::write(p, "").map_err(io("cannot create", p))?;
            }
            let env = arm.env_change_from(
                plan.dylib.as_deref(),
                status_path.as_deref().unwrap_or(Path::new("")),
                parent.iter().cloned(),
            );
            let (tool, args) = match step {
                Step::Perplexity => {
                    if is_reference && plan.save_base.is_some() {
                        *partial_base = Some(base_path.clone());
                    }
                    let mut args = plan.perplexity_args(is_reference, &text, &base_path);
                    args.extend(arm.args.common.iter().cloned());
                    (plan.tools.perplexity.clone(), args)
                }
                Step::Greedy => {
                    let mut args = plan.greedy_args();
                    args.extend(arm.args.common.iter().cloned());
                    (plan.tools.completion.clone(), args)
                }
                Step::Kernels => (
                    plan.tools
                        .backend_ops
                        .clone()
                        .expect("kernel tests planned"),
                    plan.kernel_args(plan.kernels.as_ref().expect("kernel tests planned")),
                ),
            };
            let label = format!("arm {}: {} ({})", arm.name, step.tool(), files.stdout);
            crate::term::line(format!(
                "capshim: verify: {label} [{}/{}]",
                cx.progress.finished.len() + 1,
                cx.progress.total
            ));
            cx.progress.start(label.clone());
            let (stdout, stderr) = (dir.join(&files.stdout), dir.join(&files.stderr));
            let run = ToolRun {
                tool: step.tool(),
                program: &tool,
                args: &args,
                env: &env,
                stdout: &stdout,
                stderr: &stderr,
            };
            let finished = cx.run_tool(&run)?;
            let mut record = Process::new(&arm.name, StepAt { step }, run.argv(), env, &finished);
            // test-backend-ops exits 1 when a test failed: a result, read below.
            let result_exit = finished.status.success()
                || (step == Step::Kernels && finished.status.code() == Some(1));
            // A step fails when its tool exits non-zero (test-backend-ops' 1 with a result
            // aside) or is killed, when its output gives no result, or when it is cut short
            // (exit status 0 alone does not say it ran to its end: llama::closing).
            let mut outcome = Err(finished.status.to_string());
            if result_exit {
                let marm = manifest.arms.last_mut().expect("pushed above");
                marm.steps.push(files.clone());
                let marm = manifest.arms.last().expect("pushed above");
                let saved_base = (step == Step::Perplexity && is_reference).then_some(&base_path);
                outcome = match read_step(&dir, &manifest, marm, &files) {
                    Ok(r) => complete(plan, step, is_reference, &stdout, &stderr)
                        .and_then(|()| saved_base.map_or(Ok(()), |base| base_complete(base)))
                        .map(|()| r),
                    Err(_) if !finished.status.success() => Err(format!(
                        "{}, and its output gives no result",
                        finished.status
                    )),
                    Err(e) => Err(e.to_string()),
                };
                if outcome.is_err() {
                    manifest.arms.last_mut().expect("pushed above").steps.pop();
                }
            }
            // Output cut short by a full disk is not a tool that printed nothing: say which.
            let outcome = outcome.map_err(|reason| {
                space::cut_short_by_full_disk(&stdout)
                    .or_else(|| {
                        (step == Step::Perplexity && is_reference)
                            .then(|| space::cut_short_by_full_disk(&base_path))
                            .flatten()
                    })
                    .unwrap_or(reason)
            });
            let result = match outcome {
                Ok(result) => result,
                Err(reason) => {
                    cx.failed(Failure {
                        tool: step.tool(),
                        arm: arm.name.clone(),
                        what: format!("arm {}", arm.name),
                        reason: reason.clone(),
                        stderr,
                        stdout: None,
                    })?;
                    // --keep-going: the step is recorded as failed; a failed reference leaves
                    // nothing to compare with, so no other arm runs.
                    record.failed = Some(reason.clone());
                    records.push(record);
                    let marm = manifest.arms.last_mut().expect("pushed above");
                    marm.steps.push(StepFiles {
                        failed: Some(reason),
                        ..files
                    });
                    continue;
                }
            };
            records.push(record);
            let result: StepResult = result;
            let marm = manifest.arms.last().expect("pushed above");
            cx.progress.finish();
            if let Some(why) = result.inactive(step).filter(|_| !plan.allow_inactive) {
                if is_reference {
                    return Err(ExperimentError::ReferenceInactive {
                        arm: arm.name.clone(),
                        why,
                        check: result
                            .activation
                            .as_ref()
                            .map(|a| what_to_check(a, plan.dylib.as_deref()))
                            .unwrap_or_default(),
                    });
                }
                crate::term::line(format!(
                    "capshim: verify: arm {} is not run further: {why}",
                    arm.name
                ));
                cx.progress.total -= (steps.len() - marm.steps.len()) as u64;
                break;
            }
        }
        let reference_failed = is_reference && cx.arm_failed(&arm.name);
        if is_reference
            && !reference_failed
            && let Some(path) = &plan.save_base
        {
            let record = write_sidecar(plan, prepared, &dir, &manifest, path)?;
            *partial_base = None;
            manifest.base = Some(record);
        }
        if reference_failed {
            if let Some(base) = partial_base.take() {
                let _ = std::fs::remove_file(base);
            }
            crate::term::warning(format!(
                "the reference arm {} failed: nothing can be compared with it, so no other arm \
                 is run",
                arm.name
            ));
            break;
        }
    }
    cx.check_signals()?;
    drop(work);
    // The results are of the files hashed before the first step only if none changed since.
    for stamp in &prepared.stamps {
        stamp.check()?;
    }
    seal(plan, prepared, &dir, cx.started, &manifest, &records)
}

/// Whether the base the reference arm's llama-perplexity wrote is whole: its header read and its
/// size what the header needs ([`base::read_header`]). llama-perplexity does not check its
/// writes, so a base cut short (a full disk) would otherwise be found only by the next arm,
/// which would then be blamed.
fn base_complete(base: &Path) -> Result<(), String> {
    use super::base::BaseError;
    let shown = base.display();
    super::base::read_header(base).map(drop).map_err(|e| match e {
        BaseError::WrongSize {
            actual, expected, ..
        } => format!(
            "the base it saved, {shown}, has {actual} of the {expected} bytes its header needs: \
             it was cut short"
        ),
        BaseError::NotABase { .. } => format!(
            "the base it saved, {shown}, is not whole: {} bytes, without llama-perplexity's \
             whole `_logits_` header",
            std::fs::metadata(base).map_or(0, |m| m.len())
        ),
        other => format!("the base it saved cannot be checked: {other}"),
    })
}

/// Whether a step's tool ran to its end, from its closing lines ([`closing`]): the reason
/// when it did not.
fn complete(
    plan: &Plan,
    step: Step,
    is_reference: bool,
    stdout: &Path,
    stderr: &Path,
) -> Result<(), String> {
    let read = |path: &Path| {
        std::fs::read(path)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    };
    match step {
        // The reference arm saves the base; every other perplexity run compares with it.
        Step::Perplexity => closing::perplexity(!is_reference, &read(stdout), &read(stderr)),
        Step::Greedy => closing::completion(plan.greedy.n_predict, &read(stdout), &read(stderr)),
        Step::Kernels => Ok(()),
    }
}
