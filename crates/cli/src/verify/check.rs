//! `capshim report` on a verify bundle of the current layout, once its checksums (and
//! signature) were checked: `summary.json` and `report.md` derived again from the raw files
//! and the manifest in `environment.json`, and compared byte for byte.

use std::path::Path;

use serde::Deserialize;

use super::derive::{self, DeriveError};
use super::manifest::Manifest;
use super::render;
use crate::bundle::{BundleError, schema};

#[derive(Deserialize)]
struct EnvironmentFile {
    verify: Option<Manifest>,
}

/// A derive error as a bundle error: a file that cannot be read is exit code 1 with the OS
/// error; a raw file that gives no result although it matches its checksum was changed and
/// resealed (exit code 3).
fn bundle_error(dir: &Path, e: DeriveError) -> BundleError {
    match e {
        DeriveError::Read { path, source } => BundleError::Io {
            action: "cannot read",
            path,
            source,
        },
        other => BundleError::BadRaw {
            path: dir.to_path_buf(),
            why: other.to_string(),
        },
    }
}

/// Checks the verify bundle `dir` of layout `schema` (one this capshim derives; its checksums
/// already checked) and returns its `report.md` and `summary.json` texts.
///
/// # Errors
/// [`BundleError::Mismatch`] naming the derived file that differs; [`BundleError::BadRaw`];
/// [`BundleError::Io`] when a file cannot be read; [`BundleError::NotABundle`] without a
/// manifest.
pub fn check(dir: &Path, schema: u32) -> Result<(String, String), BundleError> {
    let not_a_bundle = |why: String| BundleError::NotABundle {
        path: dir.to_path_buf(),
        why,
    };
    let path = dir.join("environment.json");
    let text = std::fs::read_to_string(&path).map_err(BundleError::io("cannot read", &path))?;
    let env: EnvironmentFile = serde_json::from_str(&text)
        .map_err(|e| not_a_bundle(format!("environment.json is not a verify record: {e}")))?;
    let manifest = env
        .verify
        .ok_or_else(|| not_a_bundle("environment.json has no `verify` manifest".into()))?;
    if let Some(rel) = manifest.path_outside() {
        return Err(not_a_bundle(format!(
            "its manifest names {rel:?}, outside the bundle; only files inside it are checked"
        )));
    }
    let summary = derive::derive(dir, &manifest, schema).map_err(|e| bundle_error(dir, e))?;
    // After the derivation, whose own refusals name what it found first.
    super::consistency::check(&manifest, &text).map_err(|why| BundleError::BadManifest {
        file: path.clone(),
        why,
    })?;
    let summary_json = serde_json::to_string_pretty(&summary).expect("a summary serializes") + "\n";
    let markdown = render::markdown(&summary);
    let files = [("summary.json", summary_json), ("report.md", markdown)];
    schema::compare_derived(dir, "verify", &files)?;
    let [(_, summary_json), (_, markdown)] = files;
    Ok((markdown, summary_json))
}
