//! Sealing a bundle once every run finished: the host baseline copied in, the derived files
//! written from the raw files ([`derive`]), then `environment.json` (with the manifest they
//! come from) and `SHA256SUMS` (hyperfine's final export).

use std::path::Path;

use super::derive::derive;
use super::environment::{Environment, Files, LlamaBuild, RunRecord};
use super::plan::Plan;
use crate::analysis::SCHEMA_VERSION;
use crate::analysis::input::ProcessRun;
use crate::bundle::{self, Manifest, ManifestArm, ManifestRun, RAW_DIR};
use crate::experiment::record::Header;
use crate::experiment::seal::{Sealed, SealedBundle};
use crate::experiment::{Context, ExperimentError, io};
use crate::launch::Os;

/// The result of a bench run.
pub struct Outcome {
    /// The bundle and its reports.
    pub bundle: SealedBundle,
    /// Arms other than the stock (reference) arm whose every run failed (`--keep-going`).
    pub no_result: Vec<String>,
}

impl Sealed for Outcome {
    fn bundle(&self) -> &SealedBundle {
        &self.bundle
    }
}

/// Seals the bundle in `dir` after the runs in `records`: adds the baseline, derives and
/// writes the reports, `environment.json` (with the start time of `cx`, the files identified
/// before the first run and llama-bench's arguments `args`) and `SHA256SUMS`.
///
/// # Errors
/// When a raw file is unreadable, the arms cannot be compared, or a file cannot be written.
pub fn seal(
    plan: &Plan,
    dir: &Path,
    cx: &Context,
    mut manifest: Manifest,
    files: Files,
    records: &[RunRecord],
    args: Vec<String>,
) -> Result<Outcome, ExperimentError> {
    if !plan.baseline.is_empty() {
        // Each host process a run of the host arm: raw/host.json for one file given alone (the
        // layout before several were accepted), else raw/host-1.json, raw/host-2.json...
        let mut runs = Vec::new();
        for (i, baseline) in plan.baseline.iter().enumerate() {
            let rel = if plan.single_baseline() {
                format!("{RAW_DIR}/host.json")
            } else {
                format!("{RAW_DIR}/host-{}.json", i + 1)
            };
            std::fs::copy(baseline, dir.join(&rel))
                .map_err(io("cannot copy into the bundle", baseline))?;
            runs.push(ManifestRun {
                round: i as u32 + 1,
                json: rel,
                stderr: None,
                status: None,
                failed: None,
            });
        }
        manifest.arms.push(ManifestArm {
            name: "host".into(),
            role: "host".into(),
            profile: None,
            shim: false,
            args: Vec::new(),
            runs,
        });
    }

    let order: Vec<ProcessRun> = records
        .iter()
        .map(|r| ProcessRun {
            arm: r.arm.clone(),
            round: r.at.round,
            seconds: Some(r.seconds),
        })
        .collect();
    let derived =
        derive(dir, &manifest, SCHEMA_VERSION, &order).map_err(ExperimentError::derive)?;
    for (name, text) in &derived.files {
        write(dir, name, text)?;
    }
    let env = Environment {
        header: Header::now("bench", SCHEMA_VERSION, cx.started),
        llama_cpp: LlamaBuild {
            build_number: derived.first_build.0,
            build_commit: derived.first_build.1.clone(),
        },
        injection_variable: Os::current().injection_var(),
        files,
        arms: &plan.arms,
        llama_bench_args: args,
        rounds: plan.rounds,
        cooldown_seconds: plan.cooldown.as_secs_f64(),
        runs: records,
        bundle: &manifest,
    };
    let env = serde_json::to_string_pretty(&env).map_err(|source| ExperimentError::Json {
        what: "environment.json",
        source,
    })? + "\n";
    write(dir, "environment.json", &env)?;
    bundle::write_sums(dir)?;
    let no_result = manifest
        .arms
        .iter()
        .filter(|a| a.role != "stock" && !a.runs.is_empty())
        .filter(|a| a.runs.iter().all(|r| r.failed.is_some()))
        .map(|a| a.name.clone())
        .collect();
    Ok(Outcome {
        no_result,
        bundle: SealedBundle {
            dir: dir.to_path_buf(),
            markdown: derived.text("report.md").to_string(),
            summary_json: derived.text("summary.json").to_string(),
        },
    })
}

fn write(dir: &Path, name: &str, text: &str) -> Result<(), ExperimentError> {
    let path = dir.join(name);
    std::fs::write(&path, text).map_err(io("cannot write", &path))
}
