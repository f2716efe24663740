//! Sealing a bundle once every run finished: the host baseline copied in, the derived files
//! written from the raw files ([`derive`]), then `environment.json` (with the manifest they
//! come from) and `SHA256SUMS` (hyperfine's final export).

use std::path::{Path, PathBuf};

use super::derive::derive;
use super::environment::{self, Environment, Files, LlamaBuild, RunRecord};
use super::error::{RunError, io};
use super::plan::Plan;
use crate::analysis::SCHEMA_VERSION;
use crate::bundle::{self, Manifest, ManifestArm, ManifestRun, RAW_DIR, time};
use crate::launch::Os;

/// The result of a bench run.
pub struct Outcome {
    /// The bundle directory.
    pub dir: PathBuf,
    /// `report.md`'s text.
    pub markdown: String,
    /// `summary.json`'s text.
    pub summary_json: String,
}

/// Seals the bundle in `dir` after the runs in `records`: adds the baseline, derives and
/// writes the reports, `environment.json` (with `started`, a Unix time in seconds, the files
/// identified before the first run and llama-bench's arguments `args`) and `SHA256SUMS`.
///
/// # Errors
/// When a raw file is unreadable, the arms cannot be compared, or a file cannot be written.
pub fn seal(
    plan: &Plan,
    dir: &Path,
    started: u64,
    mut manifest: Manifest,
    files: Files,
    records: &[RunRecord],
    args: Vec<String>,
) -> Result<Outcome, RunError> {
    if let Some(baseline) = &plan.baseline {
        let rel = format!("{RAW_DIR}/host.json");
        std::fs::copy(baseline, dir.join(&rel))
            .map_err(io("cannot copy into the bundle", baseline))?;
        manifest.arms.push(ManifestArm {
            name: "host".into(),
            role: "host".into(),
            profile: None,
            shim: false,
            runs: vec![ManifestRun {
                round: 1,
                json: rel,
                stderr: None,
                status: None,
            }],
        });
    }

    let derived = derive(dir, &manifest)?;
    for (name, text) in &derived.files {
        write(dir, name, text)?;
    }
    let env = Environment {
        schema_version: SCHEMA_VERSION,
        kind: "bench",
        capshim_version: env!("CARGO_PKG_VERSION"),
        started_utc: time::iso(started),
        finished_utc: time::iso(time::now()),
        machine: environment::collect(),
        llama_cpp: LlamaBuild {
            build_number: derived.first_build.0,
            build_commit: derived.first_build.1.clone(),
        },
        injection_variable: Os::current().injection_var(),
        files,
        arms: &plan.arms,
        llama_bench_args: args,
        rounds: plan.rounds,
        runs: records,
        bundle: &manifest,
    };
    let env = serde_json::to_string_pretty(&env).map_err(|source| RunError::Json {
        what: "environment.json",
        source,
    })? + "\n";
    write(dir, "environment.json", &env)?;
    bundle::write_sums(dir)?;
    Ok(Outcome {
        dir: dir.to_path_buf(),
        markdown: derived.text("report.md").to_string(),
        summary_json: derived.text("summary.json").to_string(),
    })
}

fn write(dir: &Path, name: &str, text: &str) -> Result<(), RunError> {
    let path = dir.join(name);
    std::fs::write(&path, text).map_err(io("cannot write", &path))
}
