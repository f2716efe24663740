//! `capshim report` on a verify bundle: its checksums, then `summary.json` and `report.md`
//! derived again from the raw files and the manifest in `environment.json`, and compared.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::derive::{self, DeriveError};
use super::manifest::{KIND, Manifest, SCHEMA_VERSION};
use super::render;
use crate::bundle::{self, BundleError};

/// Why a verify bundle cannot be reported.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// Its checksums fail, or it is unfinished or not a bundle.
    #[error(transparent)]
    Bundle(#[from] BundleError),
    /// A derived file is not what the raw files give.
    #[error(
        "{path}: {file} does not match the raw data: deriving it again from raw/ and environment.json \
         gives a different file, although every file matches SHA256SUMS, so SHA256SUMS was regenerated \
         after files were edited; do not trust its figures: rerun `capshim verify`, or restore the \
         bundle from its original copy"
    )]
    Mismatch {
        /// The bundle.
        path: PathBuf,
        /// The derived file.
        file: &'static str,
    },
    /// A raw file gives no result.
    #[error(transparent)]
    Derive(#[from] DeriveError),
}

impl CheckError {
    /// Whether the bundle cannot be trusted (exit code 3), rather than unreadable (exit 1). A
    /// raw file that matches its checksum but gives no result was sealed by a run that read it:
    /// it was changed and resealed, so it is untrusted too.
    pub fn untrusted(&self) -> bool {
        matches!(
            self,
            CheckError::Mismatch { .. }
                | CheckError::Derive(_)
                | CheckError::Bundle(
                    BundleError::Tampered { .. }
                        | BundleError::Unfinished { .. }
                        | BundleError::ReportMismatch { .. }
                )
        )
    }
}

#[derive(Deserialize)]
struct EnvironmentFile {
    kind: Option<String>,
    schema_version: Option<u32>,
    verify: Option<Manifest>,
}

/// Whether `dir` holds a verify bundle's `environment.json` (or only a verify run's
/// INCOMPLETE note).
pub fn is_verify_bundle(dir: &Path) -> bool {
    let env = std::fs::read_to_string(dir.join("environment.json")).unwrap_or_default();
    let kind = serde_json::from_str::<EnvironmentFile>(&env)
        .ok()
        .and_then(|e| e.kind);
    kind.as_deref() == Some(KIND)
        || std::fs::read_to_string(dir.join(bundle::INCOMPLETE_FILE))
            .is_ok_and(|note| note.contains("`capshim verify`"))
}

/// Checks the verify bundle `dir` and returns its `report.md` and `summary.json` texts.
///
/// # Errors
/// [`CheckError`]: see [`CheckError::untrusted`].
pub fn check(dir: &Path) -> Result<(String, String), CheckError> {
    bundle::verify(dir)?;
    let not_a_bundle = |why: String| BundleError::NotABundle {
        path: dir.to_path_buf(),
        why,
    };
    let text = std::fs::read_to_string(dir.join("environment.json"))
        .map_err(|e| not_a_bundle(format!("cannot read environment.json: {e}")))?;
    let env: EnvironmentFile = serde_json::from_str(&text)
        .map_err(|e| not_a_bundle(format!("environment.json is not a verify record: {e}")))?;
    if env.schema_version != Some(SCHEMA_VERSION) {
        return Err(not_a_bundle(format!(
            "its schema_version is {:?}, not {SCHEMA_VERSION}: use the capshim version that wrote it",
            env.schema_version
        ))
        .into());
    }
    let manifest = env
        .verify
        .ok_or_else(|| not_a_bundle("environment.json has no `verify` manifest".into()))?;
    if let Some(rel) = manifest.path_outside() {
        return Err(not_a_bundle(format!(
            "its manifest names {rel:?}, outside the bundle; only files inside it are checked"
        ))
        .into());
    }
    let summary = derive::derive(dir, &manifest)?;
    let summary_json = serde_json::to_string_pretty(&summary).expect("a summary serializes") + "\n";
    let markdown = render::markdown(&summary);
    for (file, expected) in [("summary.json", &summary_json), ("report.md", &markdown)] {
        if std::fs::read_to_string(dir.join(file)).ok().as_ref() != Some(expected) {
            return Err(CheckError::Mismatch {
                path: dir.to_path_buf(),
                file,
            });
        }
    }
    Ok((markdown, summary_json))
}
