//! Runs the experiment: every arm as a fresh llama-bench process per round, in schedule order, with
//! the shim injected only into unlocked arms; then seals the bundle. A failure or a signal
//! leaves the bundle unsealed with an INCOMPLETE note.

use std::path::{Path, PathBuf};

use indicatif::{ProgressBar, ProgressStyle};

use super::error::{RunError, io};
use super::executor::run_one;
use super::incomplete::{RunProgress, interrupted, write_incomplete};
use super::plan::Plan;
use super::schedule::interleave;
use super::seal::{Outcome, seal};
use crate::analysis::Role;
use crate::bundle::{self, Manifest, ManifestArm, ManifestRun, RAW_DIR, time};
use crate::launch::signals::Forwarder;

/// Runs the plan and writes the bundle.
///
/// # Errors
/// When llama-bench fails, its output is unreadable, an unlocked arm did not activate (without
/// `allow_inactive`), or the bundle cannot be written. Raw files written so far stay in the
/// bundle directory, which the error names.
pub fn run(plan: &Plan) -> Result<Outcome, RunError> {
    let started = time::now();
    // Before the bundle exists: a signal from now on stops the run cleanly.
    let signals = Forwarder::start_with(true).map_err(|source| RunError::Io {
        action: "cannot catch signals for",
        path: PathBuf::from("capshim bench"),
        source,
    })?;
    let dir = bundle::create(plan.output.as_deref())?;
    let mut progress = RunProgress::default();
    run_in(plan, &dir, started, &signals, &mut progress).map_err(|e| {
        let _ = write_incomplete(&dir, &progress, &e);
        RunError::Stopped {
            dir: dir.clone(),
            source: Box::new(e),
        }
    })
}

fn run_in(
    plan: &Plan,
    dir: &Path,
    started: u64,
    signals: &Forwarder,
    done: &mut RunProgress,
) -> Result<Outcome, RunError> {
    let dir_abs = std::fs::canonicalize(dir).map_err(io("cannot resolve", dir))?;
    let args = plan.llama_args();
    let slots = interleave(plan.arms.len(), plan.rounds);
    let progress = ProgressBar::new(slots.len() as u64);
    progress.set_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} runs  {msg}  ETA {eta}",
        )
        .expect("valid template"),
    );
    let mut manifest = Manifest {
        format: bundle::manifest::FORMAT,
        arms: plan
            .arms
            .iter()
            .map(|a| ManifestArm {
                name: a.name.clone(),
                role: match a.role {
                    Role::Stock => "stock",
                    Role::Host => "host",
                    Role::Other => "other",
                }
                .to_string(),
                profile: Some(a.profile_name.clone()),
                shim: a.profile.is_some(),
                runs: Vec::new(),
            })
            .collect(),
    };
    let mut records = Vec::new();
    done.total = slots.len();
    for slot in &slots {
        if let Some(number) = signals.received() {
            progress.finish_and_clear();
            return Err(interrupted(number));
        }
        let arm = &plan.arms[slot.arm];
        let message = format!("arm {}, round {}/{}", arm.name, slot.round, plan.rounds);
        progress.set_message(message.clone());
        if progress.is_hidden() {
            eprintln!("capshim: bench: {message}");
        }
        let stem = format!("{}-r{}", arm.name, slot.round);
        let json_rel = format!("{RAW_DIR}/{stem}.json");
        let stderr_rel = format!("{RAW_DIR}/{stem}.stderr");
        let status_rel = arm
            .profile
            .is_some()
            .then(|| format!("{RAW_DIR}/{stem}.status.jsonl"));
        done.current = Some(format!(
            "arm {} round {} ({json_rel})",
            arm.name, slot.round
        ));
        let record = run_one(
            plan,
            arm,
            slot.round,
            &args,
            &dir_abs,
            &json_rel,
            &stderr_rel,
            status_rel.as_deref(),
            signals,
        )
        .inspect_err(|_| progress.finish_and_clear())?;
        done.finished.extend(done.current.take());
        records.push(record);
        manifest.arms[slot.arm].runs.push(ManifestRun {
            round: slot.round,
            json: json_rel,
            stderr: Some(stderr_rel),
            status: status_rel,
        });
        progress.inc(1);
    }
    progress.finish_and_clear();

    seal(plan, dir, started, manifest, &records, args)
}
