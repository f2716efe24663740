//! A bench bundle's derived files, from its primary files alone: the raw llama-bench outputs
//! under `raw/` and the manifest in `environment.json` give the [`Summary`], which gives
//! `summary.json`, `report.md`, `results.csv` and `chart.svg` (schema 6: also `rounds.svg`,
//! and the statistics of [`Derivation::Schema6`], which also read the processes in the order
//! run, `environment.json`'s `runs`). The seal writes what
//! [`derive`] returns; `capshim report` derives it again and compares ([`super::check`]).

use std::path::Path;

use serde::Serialize;

use crate::analysis::input::ProcessRun;
use crate::analysis::{AnalyzeError, Derivation, Options, Summary, analyze, analyze_with};
use crate::bundle::Manifest;
use crate::bundle::load::{LoadError, load_arms_with};
use crate::export::{self, ExportError};

/// The derived files of a bench bundle of the layout bench writes (6), in the order they are
/// compared.
pub const DERIVED_FILES: [&str; 5] = [
    "summary.json",
    "report.md",
    "results.csv",
    "chart.svg",
    "rounds.svg",
];

/// The derived files of a bench bundle of layout `schema` (5 lacks `rounds.svg`).
pub fn derived_files(schema: u32) -> &'static [&'static str] {
    if schema >= 6 {
        &DERIVED_FILES
    } else {
        &DERIVED_FILES[..4]
    }
}

/// `summary.json`: the summary, and the manifest it was derived with.
#[derive(Serialize)]
struct SummaryFile<'a> {
    #[serde(flatten)]
    summary: &'a Summary,
    bundle: &'a Manifest,
}

/// Why the derived files cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum DeriveError {
    /// A raw file cannot be read or used.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The arms cannot be compared.
    #[error(transparent)]
    Analyze(#[from] AnalyzeError),
    /// An output format failed.
    #[error(transparent)]
    Export(#[from] ExportError),
    /// `summary.json` cannot be serialized.
    #[error("cannot serialize summary.json: {0}")]
    Json(#[from] serde_json::Error),
}

/// What [`derive`] gives.
pub struct Derived {
    /// Each derived file's name and text, in [`DERIVED_FILES`] order.
    pub files: Vec<(&'static str, String)>,
    /// The llama.cpp build of the first result: `build_number`, `build_commit`.
    pub first_build: (Option<i64>, Option<String>),
}

impl Derived {
    /// The text of the derived file `name`.
    pub fn text(&self, name: &str) -> &str {
        self.files
            .iter()
            .find(|(n, _)| *n == name)
            .map_or("", |(_, t)| t.as_str())
    }
}

/// What the report says of runs `--keep-going` recorded as failed: an arm with some failed
/// runs, one that failed in every round (no figures, no speedup), and a reference arm that
/// failed in every round (no speedup at all, and the arms that ran).
pub fn failed_runs(manifest: &Manifest) -> Vec<String> {
    let mut out = Vec::new();
    for arm in &manifest.arms {
        let failed: Vec<String> = arm
            .runs
            .iter()
            .filter_map(|r| Some(format!("round {}: {}", r.round, r.failed.as_ref()?)))
            .collect();
        if failed.is_empty() {
            continue;
        }
        let every = failed.len() == arm.runs.len();
        out.push(match (every, arm.role.as_str()) {
            (true, "stock") => {
                let ran: Vec<&str> = manifest
                    .arms
                    .iter()
                    .filter(|a| a.runs.iter().any(|r| r.failed.is_none()))
                    .map(|a| a.name.as_str())
                    .collect();
                format!(
                    "the reference arm {} failed in every round ({}): no speedup is computed; the \
                     arms that ran: {}",
                    arm.name,
                    failed.join("; "),
                    if ran.is_empty() {
                        "none".to_string()
                    } else {
                        ran.join(", ")
                    }
                )
            }
            (true, _) => format!(
                "arm {} failed in every round ({}): it has no figures and no speedup",
                arm.name,
                failed.join("; ")
            ),
            (false, _) => format!(
                "arm {}: {} of {} runs failed ({}); its figures, and its speedup's pairs, come \
                 from the other rounds",
                arm.name,
                failed.len(),
                arm.runs.len(),
                failed.join("; ")
            ),
        });
    }
    out
}

/// Derives every derived file of the bundle `dir`, of layout `schema` (5 or 6: the layouts
/// whose derivation this capshim keeps, [`crate::bundle::schema::derivable`]), from its raw
/// files, `manifest` and `runs` (its processes in the order run; schema 6 only). Schema 5
/// derives as the capshim that wrote it did ([`analyze`]); schema 6 adds failed runs
/// (`--keep-going`), the statistics of [`Derivation::Schema6`] and `rounds.svg`.
///
/// # Errors
/// [`DeriveError`] when a raw file is unreadable or unusable, or the arms cannot be compared.
pub fn derive(
    dir: &Path,
    manifest: &Manifest,
    schema: u32,
    runs: &[ProcessRun],
) -> Result<Derived, DeriveError> {
    let arms = load_arms_with(dir, manifest, None, Some(runs))?;
    let mut summary = if schema >= 6 {
        analyze_with(
            &arms,
            &Options {
                derivation: Derivation::Schema6,
                sequences: vec![runs.to_vec()],
            },
        )?
    } else {
        analyze(&arms)?
    };
    summary.schema_version = schema;
    summary.warnings.extend(failed_runs(manifest));
    let first_build = arms
        .iter()
        .flat_map(|a| a.runs.iter())
        .flat_map(|r| r.rows.iter())
        .next()
        .map_or((None, None), |r| (r.build_number, r.build_commit.clone()));
    let mut files = vec![(
        DERIVED_FILES[0],
        serde_json::to_string_pretty(&SummaryFile {
            summary: &summary,
            bundle: manifest,
        })? + "\n",
    )];
    for name in &derived_files(schema)[1..] {
        let exporter = export::for_schema(schema)
            .into_iter()
            .find(|e| e.file_name() == *name)
            .expect("every derived file has an exporter");
        files.push((name, exporter.render(&summary)?));
    }
    Ok(Derived { files, first_build })
}
