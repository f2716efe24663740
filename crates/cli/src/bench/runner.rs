//! Runs the experiment: the files identified (the model hashed) before the first run, every
//! arm as a fresh llama-bench process per round, in schedule order, with the shim injected
//! only into unlocked arms; the files checked unchanged after the last run; then the seal. A
//! failure or a signal leaves the bundle unsealed with an INCOMPLETE note.

use std::path::{Path, PathBuf};

use indicatif::{ProgressBar, ProgressStyle};

use super::environment::Files;
use super::error::{RunError, io};
use super::executor::run_one;
use super::incomplete::{interrupted, write_incomplete};
use super::plan::Plan;
use super::schedule::interleave;
use super::seal::{Outcome, seal};
use crate::analysis::Role;
use crate::bundle::identity::{Stamp, identify};
use crate::bundle::incomplete::Progress;
use crate::bundle::{self, Manifest, ManifestArm, ManifestRun, RAW_DIR, time};
use crate::launch::signals::Forwarder;

/// Runs the plan and writes the bundle.
///
/// # Errors
/// When a file cannot be hashed, llama-bench fails, its output is unreadable, an unlocked arm
/// did not activate (without `allow_inactive`), a file changed during the runs, or the bundle
/// cannot be written. Raw files written so far stay in the bundle directory, which the error
/// names.
pub fn run(plan: &Plan) -> Result<Outcome, RunError> {
    let started = time::now();
    // Before the bundle exists: a signal from now on stops the run cleanly.
    let signals = Forwarder::start_with(true).map_err(|source| RunError::Io {
        action: "cannot catch signals for",
        path: PathBuf::from("capshim bench"),
        source,
    })?;
    let dir = bundle::create(plan.output.as_deref())?;
    let mut progress = Progress {
        total: plan.arms.len() as u64 * u64::from(plan.rounds),
        ..Progress::default()
    };
    run_in(plan, &dir, started, &signals, &mut progress).map_err(|e| {
        let _ = write_incomplete(&dir, &progress, &e);
        RunError::Stopped {
            dir: dir.clone(),
            source: Box::new(e),
        }
    })
}

/// Identifies every file the runs use, the model first, before the first run.
fn identify_files(plan: &Plan, signals: &Forwarder) -> Result<(Files, Vec<Stamp>), RunError> {
    let stop = || signals.received();
    let mut stamps = Vec::new();
    let mut one = |path: &Path, what: &str| -> Result<_, RunError> {
        let (id, stamp) = identify(path, what, &stop)?;
        stamps.push(stamp);
        Ok(id)
    };
    let files = Files {
        model: one(&plan.model, "model")?,
        llama_bench: one(&plan.llama_bench, "llama-bench")?,
        dylib: plan
            .dylib
            .as_deref()
            .map(|p| one(p, "shim library"))
            .transpose()?,
        baseline: plan
            .baseline
            .as_deref()
            .map(|p| one(p, "baseline"))
            .transpose()?,
    };
    Ok((files, stamps))
}

fn run_in(
    plan: &Plan,
    dir: &Path,
    started: u64,
    signals: &Forwarder,
    done: &mut Progress,
) -> Result<Outcome, RunError> {
    let dir_abs = std::fs::canonicalize(dir).map_err(io("cannot resolve", dir))?;
    let (files, stamps) = identify_files(plan, signals)?;
    let args = plan.llama_args();
    let progress = ProgressBar::new(done.total);
    progress.set_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} runs  {msg}  ETA {eta}",
        )
        .expect("valid template"),
    );
    let mut manifest = Manifest {
        format: bundle::manifest::FORMAT,
        model: Some(plan.model.display().to_string()),
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
    for slot in interleave(plan.arms.len(), plan.rounds, rand::rng()) {
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
        done.start(format!(
            "arm {} round {} ({json_rel})",
            arm.name, slot.round
        ));
        let record = run_one(
            plan,
            arm,
            slot.round,
            &args,
            &dir_abs,
            (&json_rel, &stderr_rel, status_rel.as_deref()),
            signals,
            done,
        )
        .inspect_err(|_| progress.finish_and_clear())?;
        done.finish();
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
    // The results are of the files hashed before the first run only if none changed since.
    for stamp in &stamps {
        stamp.check()?;
    }
    seal(plan, dir, started, manifest, files, &records, args)
}
