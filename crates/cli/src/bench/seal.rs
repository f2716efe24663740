//! Sealing a bundle once every run finished: the host baseline copied in, the arms
//! analysed, `summary.json` and every exporter's file written, then `environment.json`
//! and `SHA256SUMS` (hyperfine's final export).

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::environment::{self, Environment, Files, LlamaBuild, RunRecord, file_id};
use super::error::{RunError, io};
use super::plan::Plan;
use crate::analysis::{Summary, analyze};
use crate::bundle::{self, Manifest, ManifestArm, ManifestRun, RAW_DIR, time};
use crate::export;
use crate::launch::Os;

#[derive(Serialize)]
struct SummaryFile<'a> {
    #[serde(flatten)]
    summary: &'a Summary,
    bundle: &'a Manifest,
}

/// The result of a bench run.
pub struct Outcome {
    /// The bundle directory.
    pub dir: PathBuf,
    /// `report.md`'s text.
    pub markdown: String,
    /// `summary.json`'s text.
    pub summary_json: String,
}

/// Seals the bundle in `dir` after the runs in `records`: adds the baseline, analyses the
/// raw files, writes the reports, `environment.json` (with `started`, a Unix time in seconds,
/// and llama-bench's arguments `args`) and `SHA256SUMS`.
///
/// # Errors
/// When a raw file is unreadable, the arms cannot be compared, or a file cannot be written.
pub fn seal(
    plan: &Plan,
    dir: &Path,
    started: u64,
    mut manifest: Manifest,
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

    let arms = bundle::load_arms(dir, &manifest, None)?;
    let summary = analyze(&arms)?;
    let summary_json = serde_json::to_string_pretty(&SummaryFile {
        summary: &summary,
        bundle: &manifest,
    })
    .map_err(|source| RunError::Json {
        what: "summary.json",
        source,
    })? + "\n";
    write(dir, "summary.json", &summary_json)?;
    let mut markdown = String::new();
    for exporter in export::all() {
        if exporter.file_name() == "summary.json" {
            continue;
        }
        let text = exporter.render(&summary)?;
        if exporter.file_name() == "report.md" {
            markdown = text.clone();
        }
        write(dir, exporter.file_name(), &text)?;
    }

    let first_row = arms
        .iter()
        .flat_map(|a| a.runs.iter())
        .flat_map(|r| r.rows.iter())
        .next();
    let env = Environment {
        capshim_version: env!("CARGO_PKG_VERSION"),
        started_utc: time::iso(started),
        finished_utc: time::iso(time::now()),
        machine: environment::collect(),
        llama_cpp: LlamaBuild {
            build_number: first_row.and_then(|r| r.build_number),
            build_commit: first_row.and_then(|r| r.build_commit.clone()),
        },
        injection_variable: Os::current().injection_var(),
        files: Files {
            model: file_id(&plan.model)?,
            llama_bench: file_id(&plan.llama_bench)?,
            dylib: plan.dylib.as_deref().map(file_id).transpose()?,
            baseline: plan.baseline.as_deref().map(file_id).transpose()?,
        },
        arms: &plan.arms,
        llama_bench_args: args,
        rounds: plan.rounds,
        runs: records,
    };
    let env = serde_json::to_string_pretty(&env).map_err(|source| RunError::Json {
        what: "environment.json",
        source,
    })? + "\n";
    write(dir, "environment.json", &env)?;
    bundle::write_sums(dir)?;
    Ok(Outcome {
        dir: dir.to_path_buf(),
        markdown,
        summary_json,
    })
}

fn write(dir: &Path, name: &str, text: &str) -> Result<(), RunError> {
    let path = dir.join(name);
    std::fs::write(&path, text).map_err(io("cannot write", &path))
}
