//! `capshim report` on a tune bundle of the current layout, once its checksums (and signature)
//! were checked: every verify bundle inside it checked as verify bundles are, then
//! `summary.json`, `report.md` and the recommendation derived again from the raw files and the
//! manifest in `environment.json` (the search replayed), and compared byte for byte.

use std::path::Path;

use super::derive::{self, DeriveError};
use super::manifest::{Manifest, RECOMMENDATION};
use crate::bundle::{BundleError, schema};
use crate::experiment::seal::read_manifest;

/// Checks the tune bundle `dir` (its checksums already checked) and returns its `report.md`
/// and `summary.json` texts.
///
/// # Errors
/// [`BundleError::Mismatch`] naming the derived file that differs (or a recommendation there
/// should be none); [`BundleError::BadRaw`] when a raw file gives no result or the manifest
/// describes no search; a verify bundle inside it failing its own check; [`BundleError::Io`];
/// [`BundleError::NotABundle`] without a manifest.
pub fn check(dir: &Path) -> Result<(String, String), BundleError> {
    let manifest: Manifest = read_manifest(dir, "tune")?;
    if let Some(rel) = manifest.path_outside() {
        return Err(BundleError::NotABundle {
            path: dir.to_path_buf(),
            why: format!(
                "its manifest names {rel:?}, outside the bundle; only files inside it are checked"
            ),
        });
    }
    for v in manifest.verify.iter().filter(|v| !v.check) {
        let sub = dir.join(&v.bundle);
        if sub.join(crate::bundle::SUMS_FILE).is_file() {
            crate::verify::check::check(&sub, crate::verify::manifest::SCHEMA_VERSION)?;
        }
    }
    let derived = derive::derive(dir, &manifest).map_err(|e: DeriveError| match e {
        DeriveError::Manifest(why) => BundleError::BadManifest {
            file: dir.join("environment.json"),
            why,
        },
        DeriveError::NoResult { .. } => BundleError::BadRaw {
            path: dir.to_path_buf(),
            why: e.to_string(),
        },
    })?;
    schema::compare_derived(dir, "tune", &derived.files)?;
    if derived.files.iter().all(|(n, _)| *n != RECOMMENDATION) && dir.join(RECOMMENDATION).exists()
    {
        return Err(BundleError::Mismatch {
            path: dir.to_path_buf(),
            file: RECOMMENDATION,
            tool: "tune",
        });
    }
    Ok((
        derived.text("report.md").to_string(),
        derived.text("summary.json").to_string(),
    ))
}
