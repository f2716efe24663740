//! `capshim report` on a tune bundle of the current layout, once its checksums (and signature)
//! were checked: every verify bundle inside it checked as verify bundles are, then
//! `summary.json`, `report.md` and the recommendation derived again from the raw files and the
//! manifest in `environment.json` (the search replayed), and compared byte for byte.

use std::path::Path;

use super::consistency::{self, RunSeen};
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
    let bad_manifest = |why: String| BundleError::BadManifest {
        file: dir.join("environment.json"),
        why,
    };
    // A verify that reached its verdicts (exit 0 or 5) sealed its bundle: checked, and refused
    // when unsealed, whatever else its files say. Any other verify's verdict is `failed` and its
    // files are not read ([`derive::verify_result`]).
    for v in manifest.verify.iter().filter(|v| !v.check) {
        if matches!(v.exit_code, Some(0 | 5)) {
            let sub = dir.join(&v.bundle);
            crate::bundle::sums::verify(&sub)?;
            crate::verify::check::check(&sub, crate::verify::manifest::SCHEMA_VERSION)?;
            // Exit 0: every arm verify compared was equivalent, this candidate among them.
            let verdict = derive::verify_result(dir, v).verdict;
            if v.exit_code == Some(0) && verdict != "equivalent" {
                return Err(bad_manifest(format!(
                    "tune.verify: the verify of {:?} is recorded as exiting 0 (every arm \
                     equivalent), but its bundle {} says {verdict:?}",
                    v.label, v.bundle
                )));
            }
        }
    }
    let derived = derive::derive(dir, &manifest).map_err(|e: DeriveError| match e {
        DeriveError::Manifest(why) => bad_manifest(why),
        DeriveError::NoResult { .. } => BundleError::BadRaw {
            path: dir.to_path_buf(),
            why: e.to_string(),
        },
    })?;
    // After the replay, whose own refusals name what it found first (a round given twice).
    consistency::check(&manifest, &runs_of(dir)?, &super::knobs::catalogue())
        .map_err(bad_manifest)?;
    schema::compare_derived(dir, "tune", &derived.files)?;
    // The recommendation is one `--profile-file` takes (its values the shim's).
    if let Some((_, text)) = derived.files.iter().find(|(n, _)| *n == RECOMMENDATION) {
        crate::profile::check_file_text(&dir.join(RECOMMENDATION), text).map_err(|e| {
            bad_manifest(format!(
                "tune.candidates: the winner's {RECOMMENDATION}: {e}"
            ))
        })?;
    }
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

/// The processes `environment.json`'s `runs` records (the search's, not verify's).
///
/// # Errors
/// [`BundleError::BadManifest`] when `runs` is missing or not a list of processes.
fn runs_of(dir: &Path) -> Result<Vec<RunSeen>, BundleError> {
    let path = dir.join("environment.json");
    let text = std::fs::read_to_string(&path).map_err(BundleError::io("cannot read", &path))?;
    #[derive(serde::Deserialize)]
    struct Runs {
        runs: Vec<RunSeen>,
    }
    serde_json::from_str::<Runs>(&text)
        .map(|r| r.runs)
        .map_err(|e| BundleError::BadManifest {
            file: path,
            why: format!("runs: {e}"),
        })
}
