//! `capshim report` on a bench bundle of the current layout, once its checksums (and
//! signature) were checked: every derived file derived again from `raw/` and the manifest
//! in `environment.json`, and compared byte for byte.

use std::path::Path;

use super::derive::{DeriveError, Derived, derive};
use crate::bundle::load::{LoadError, read_manifest, read_runs};
use crate::bundle::{BundleError, Manifest, schema};
use crate::input_file::InputError;
use crate::llama::bench_json::ParseError;

/// A derive error as a bundle error: a file that cannot be read is exit code 1 with the OS
/// error; a raw file read and found unusable, or arms that cannot be compared, mean the bundle
/// was changed after the run that sealed it read them (exit code 3).
fn bundle_error(dir: &Path, e: DeriveError) -> BundleError {
    match e {
        DeriveError::Load(LoadError::Read { path, source })
        | DeriveError::Load(LoadError::Bench(ParseError::Read {
            source: InputError::Io { path, source },
        })) => BundleError::Io {
            action: "cannot read",
            path,
            source,
        },
        e @ (DeriveError::Load(_) | DeriveError::Analyze(_)) => BundleError::BadRaw {
            path: dir.to_path_buf(),
            why: crate::format::chain(&e),
        },
        e @ (DeriveError::Export(_) | DeriveError::Json(_)) => BundleError::Io {
            action: "cannot derive the files of",
            path: dir.to_path_buf(),
            source: std::io::Error::other(e.to_string()),
        },
    }
}

/// Checks the bench bundle `dir` of layout `schema` (one this capshim derives; its checksums
/// already checked): returns its manifest and derived files.
///
/// # Errors
/// [`BundleError::Mismatch`] naming the first derived file that is not what the raw files
/// derive to; [`BundleError::BadRaw`]; [`BundleError::Io`] when a file cannot be read;
/// [`BundleError::NotABundle`] without a manifest.
pub fn check(dir: &Path, schema: u32) -> Result<(Manifest, Derived), BundleError> {
    let manifest = read_manifest(dir)?;
    let runs = if schema >= 6 {
        read_runs(dir, None)?
    } else {
        Vec::new()
    };
    let derived = derive(dir, &manifest, schema, &runs).map_err(|e| bundle_error(dir, e))?;
    schema::compare_derived(dir, "bench", &derived.files)?;
    Ok((manifest, derived))
}
