//! The bench experiment on the experiment layer: the files identified (the model hashed)
//! before the first run, every arm as a fresh llama-bench process per round in each round's
//! random order ([`crate::experiment::rounds`]), with the shim injected only into unlocked
//! arms; the files checked unchanged after the last run; then the seal. A failure or a signal
//! leaves the bundle unsealed with an INCOMPLETE note; with `--keep-going` a failed run is
//! recorded as failed and the rounds go on.

use std::path::Path;

use super::derive::DERIVED_FILES;
use super::environment::{Files, RunRecord};
use super::executor::run_one;
use super::plan::Plan;
use super::seal::{Outcome, seal};
use crate::analysis::Role;
use crate::bundle::identity::{Stamp, identify};
use crate::bundle::{self, Manifest, ManifestArm, ManifestRun, RAW_DIR};
use crate::experiment::rounds::run_rounds;
use crate::experiment::{self, Context, Experiment, ExperimentError, Words, io};

/// How bench speaks of itself.
pub const WORDS: Words = Words {
    command: "bench",
    unit: "run",
    running: "llama-bench",
    tool_option: "--llama-bench",
    fix: "model path, llama-bench options after `--`",
    prefix: "capshim-bench",
};

/// A bench run of a [`Plan`].
struct Bench<'a> {
    plan: &'a Plan,
}

/// Runs the plan and writes the bundle.
///
/// # Errors
/// When a file cannot be hashed, llama-bench fails (without `--keep-going`), its output is
/// unreadable, an unlocked arm did not activate (without `allow_inactive`), a file changed
/// during the runs, or the bundle cannot be written. Raw files written so far stay in the
/// bundle directory, which the error names.
pub fn run(plan: &Plan) -> Result<Outcome, ExperimentError> {
    experiment::run(&mut Bench { plan })
}

impl Experiment for Bench<'_> {
    type Sealed = Outcome;

    fn words(&self) -> Words {
        WORDS
    }

    fn derived(&self) -> &'static [&'static str] {
        &DERIVED_FILES
    }

    fn output(&self) -> Option<&Path> {
        self.plan.output.as_deref()
    }

    fn keep_going(&self) -> bool {
        self.plan.keep_going
    }

    fn cooldown(&self) -> std::time::Duration {
        self.plan.cooldown
    }

    fn run_in(&mut self, dir: &Path, cx: &mut Context) -> Result<Outcome, ExperimentError> {
        run_in(self.plan, dir, cx)
    }
}

/// Identifies every file the runs use, the model first, before the first run: their records
/// for `environment.json`, and their stamps to check them unchanged after the last run.
///
/// # Errors
/// When a file cannot be hashed, or a signal stopped the hashing.
pub fn identify_files(plan: &Plan, cx: &Context) -> Result<(Files, Vec<Stamp>), ExperimentError> {
    let stop = || cx.signals.received();
    let mut stamps = Vec::new();
    let mut one = |path: &Path, what: &str| -> Result<_, ExperimentError> {
        let (id, stamp) = identify(path, what, &stop)?;
        stamps.push(stamp);
        Ok(id)
    };
    let mut files = Files {
        model: one(&plan.model, "model")?,
        llama_bench: one(&plan.llama_bench, "llama-bench")?,
        dylib: plan
            .dylib
            .as_deref()
            .map(|p| one(p, "shim library"))
            .transpose()?,
        baseline: None,
        baselines: plan
            .baseline
            .iter()
            .map(|p| one(p, "baseline"))
            .collect::<Result<_, _>>()?,
        baseline_bundles: plan
            .baseline_sums
            .iter()
            .map(|p| one(p, "baseline bundle's SHA256SUMS"))
            .collect::<Result<_, _>>()?,
    };
    // One file given alone is recorded as before several were accepted.
    if plan.single_baseline() {
        files.baseline = files.baselines.pop();
    }
    Ok((files, stamps))
}

fn run_in(plan: &Plan, dir: &Path, cx: &mut Context) -> Result<Outcome, ExperimentError> {
    let dir_abs = std::fs::canonicalize(dir).map_err(io("cannot resolve", dir))?;
    cx.progress.total = plan.arms.len() as u64 * u64::from(plan.rounds);
    let (files, stamps) = identify_files(plan, cx)?;
    let args = plan.llama_args();
    let mut manifest = Manifest {
        format: bundle::manifest::FORMAT,
        model: Some(plan.model.display().to_string()),
        workload: None,
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
                args: a.args.bench.clone(),
                runs: Vec::new(),
            })
            .collect(),
    };
    let mut records: Vec<RunRecord> = Vec::new();
    let names: Vec<String> = plan.arms.iter().map(|a| a.name.clone()).collect();
    run_rounds(cx, &names, plan.rounds, |cx, slot| {
        let arm = &plan.arms[slot.arm];
        let stem = format!("{}-r{}", arm.name, slot.round);
        let json_rel = format!("{RAW_DIR}/{stem}.json");
        let stderr_rel = format!("{RAW_DIR}/{stem}.stderr");
        let status_rel = arm
            .profile
            .is_some()
            .then(|| format!("{RAW_DIR}/{stem}.status.jsonl"));
        cx.progress.start(format!(
            "arm {} round {} ({json_rel})",
            arm.name, slot.round
        ));
        let (record, failed) = run_one(
            plan,
            arm,
            slot.round,
            &plan.llama_args_for(arm),
            &dir_abs,
            (&json_rel, &stderr_rel, status_rel.as_deref()),
            cx,
        )?;
        if failed.is_none() {
            cx.progress.finish();
        }
        records.push(record);
        manifest.arms[slot.arm].runs.push(ManifestRun {
            round: slot.round,
            json: json_rel,
            stderr: Some(stderr_rel),
            status: status_rel,
            failed,
        });
        Ok(())
    })?;
    // The results are of the files hashed before the first run only if none changed since.
    for stamp in &stamps {
        stamp.check()?;
    }
    seal(plan, dir, cx, manifest, files, &records, args)
}
