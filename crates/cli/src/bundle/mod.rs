//! Evidence bundles: a directory that holds a run's raw outputs (`bench` or `verify`) and
//! everything derived from them, sealed by `SHA256SUMS` and optionally signed. A bundle is
//! created once and never overwritten. docs/bundles.md describes every file.
//!
//! - [`sums`]: `SHA256SUMS`, written and checked; [`sign`]: its OpenSSH signature.
//! - [`schema`]: the kind and layout of a bundle, and the comparison of its derived files.
//! - [`identity`]: the files a run used, hashed before its first process.
//! - [`incomplete`]: the note a stopped run leaves instead of a seal.
//! - [`manifest`] and [`load`]: a bench bundle's raw files, read back for the analysis;
//!   [`workload`]: a `bench --command` bundle's command and how its values are read.

pub mod identity;
pub mod incomplete;
pub mod load;
pub mod manifest;
pub mod schema;
pub mod sign;
pub mod sums;
pub mod time;
pub mod workload;

use std::path::{Path, PathBuf};

pub use load::load_arms;
pub use manifest::{Manifest, ManifestArm, ManifestRun};
pub use sums::{verify, write_sums};

/// The checksum file at the top of a bundle.
pub const SUMS_FILE: &str = "SHA256SUMS";
/// The OpenSSH signature of [`SUMS_FILE`], when the bundle is signed.
pub const SIG_FILE: &str = "SHA256SUMS.sig";
/// The note `capshim bench` leaves in a bundle it could not finish.
pub const INCOMPLETE_FILE: &str = "INCOMPLETE";
/// The directory of raw llama-bench outputs, stderr and status files.
pub const RAW_DIR: &str = "raw";

/// Why a bundle cannot be created, read or trusted.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// The output directory already exists.
    #[error(
        "{0} already exists: a bundle is never overwritten; choose a new -o directory or leave -o out \
         for a new dated one"
    )]
    Exists(PathBuf),
    /// A file system operation failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// On which path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The directory is not a bundle.
    #[error(
        "{path} is not a capshim evidence bundle ({why}); give a directory written by `capshim bench`, \
         or llama-bench files with --arm NAME=FILE"
    )]
    NotABundle {
        /// The directory.
        path: PathBuf,
        /// What is missing.
        why: String,
    },
    /// The bundle was never sealed: the run that wrote it did not finish.
    #[error(
        "{path} has no {SUMS_FILE}: the capshim run that wrote it did not finish{}; \
         do not trust its figures: run it again",
        if *has_note { format!(" (its {INCOMPLETE_FILE} note says which runs finished and why it stopped)") } else { String::new() }
    )]
    Unfinished {
        /// The bundle.
        path: PathBuf,
        /// Whether it holds an INCOMPLETE note.
        has_note: bool,
    },
    /// The checksums hold but a derived file is not what the raw files derive to.
    #[error(
        "{path}: {file} does not match the raw data: deriving it again from raw/ and environment.json \
         gives a different file, although every file matches {SUMS_FILE}, so {SUMS_FILE} was \
         regenerated after files were edited; do not trust its figures: rerun `capshim {tool}`, or \
         restore the bundle from its original copy"
    )]
    Mismatch {
        /// The bundle.
        path: PathBuf,
        /// The derived file.
        file: &'static str,
        /// The command that wrote the bundle.
        tool: &'static str,
    },
    /// A raw file that matches its checksum gives no result: the run that sealed it read it,
    /// so it was changed and resealed.
    #[error(
        "{path}: a raw file gives no result although it matches {SUMS_FILE} ({why}); the run that \
         sealed the bundle read it, so it was changed and {SUMS_FILE} regenerated: do not trust \
         its figures"
    )]
    BadRaw {
        /// The bundle.
        path: PathBuf,
        /// What is wrong with the file.
        why: String,
    },
    /// A manifest value the derivation uses is out of range or inconsistent, although the file
    /// matches its checksum: the run that sealed the bundle wrote none such, so it was edited.
    #[error(
        "{}: {why}, although it matches {SUMS_FILE}; the run that sealed the bundle wrote no \
         such value, so it was edited and {SUMS_FILE} regenerated: do not trust its figures",
        file.display()
    )]
    BadManifest {
        /// The file that holds the manifest (`environment.json`).
        file: PathBuf,
        /// The field and what is wrong with its value.
        why: String,
    },
    /// The bundle's layout is one this capshim does not derive again (an unknown kind or
    /// `schema_version`, or an older layout whose derivation is not kept): its derived files
    /// cannot be checked, and a relabel would otherwise turn their check off.
    #[error(
        "{}: {field} {found}: {why}. Its derived files (report.md, summary.json...) cannot be \
         derived again from its raw files, so they are not shown: do not trust them; \
         `capshim report --as-written` shows them marked unverified, and the capshim version \
         that wrote the bundle checks them",
        file.display()
    )]
    Underivable {
        /// The file that holds the field (`environment.json` or `summary.json`).
        file: PathBuf,
        /// The field: `kind` or `schema_version`.
        field: &'static str,
        /// Its value as written.
        found: String,
        /// Why this capshim does not derive it.
        why: String,
    },
    /// `environment.json`'s top-level `workload` is not its manifest's `bundle.workload`:
    /// one copy was edited and the checksums regenerated.
    #[error(
        "{}: `workload.{field}` is not the manifest's `bundle.workload.{field}`, although every \
         file matches {SUMS_FILE}, so one copy was edited and {SUMS_FILE} regenerated; do not \
         trust its figures: rerun `capshim bench --command`, or restore the bundle from its \
         original copy",
        file.display()
    )]
    Disagrees {
        /// The bundle's `environment.json`.
        file: PathBuf,
        /// The field that differs (`command`, `regex`, `unit`, `lower_is_better`, `measure`),
        /// or `*` when one copy is missing.
        field: String,
    },
    /// The signature was asked for and does not hold, or cannot be checked.
    #[error(transparent)]
    Signature(#[from] sign::SignError),
    /// The bundle's files do not match its `SHA256SUMS`.
    #[error(
        "{path} was changed after it was written: {}; do not trust its figures: run the capshim bench \
         or verify that wrote it again, or restore the bundle from its original copy",
        problems.join("; ")
    )]
    Tampered {
        /// The bundle.
        path: PathBuf,
        /// Every file that differs, is missing or was added.
        problems: Vec<String>,
    },
}

impl BundleError {
    /// Whether the bundle is not to be trusted (exit code 3): changed, unfinished, derived
    /// files that do not match, a bad or missing signature. Other errors (unreadable files,
    /// not a bundle) are exit code 1.
    pub fn untrusted(&self) -> bool {
        match self {
            BundleError::Tampered { .. }
            | BundleError::Unfinished { .. }
            | BundleError::Mismatch { .. }
            | BundleError::BadRaw { .. }
            | BundleError::Disagrees { .. }
            | BundleError::BadManifest { .. }
            | BundleError::Underivable { .. } => true,
            BundleError::Signature(e) => e.untrusted(),
            _ => false,
        }
    }

    pub(crate) fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.to_path_buf();
        move |source| BundleError::Io {
            action,
            path,
            source,
        }
    }
}

/// Creates a new bundle directory with its `raw/` subdirectory.
///
/// With `path`, that exact directory, which must not exist. Without, a new
/// `<prefix>-YYYYMMDD-HHMMSS` directory (UTC) in the current directory, with `-2`, `-3`...
/// appended if that name is taken.
///
/// # Errors
/// [`BundleError::Exists`] when `path` exists; [`BundleError::Io`] when it cannot be created.
pub fn create_named(path: Option<&Path>, prefix: &str) -> Result<PathBuf, BundleError> {
    let dir = match path {
        Some(p) => {
            if p.exists() {
                return Err(BundleError::Exists(p.to_path_buf()));
            }
            create_new(p)?;
            p.to_path_buf()
        }
        None => {
            let base = format!("{prefix}-{}", time::compact(time::now()));
            let mut made = None;
            for n in 1..1000 {
                let name = if n == 1 {
                    base.clone()
                } else {
                    format!("{base}-{n}")
                };
                let candidate = PathBuf::from(&name);
                match std::fs::create_dir(&candidate) {
                    Ok(()) => {
                        made = Some(candidate);
                        break;
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                    Err(e) => return Err(BundleError::io("cannot create", &candidate)(e)),
                }
            }
            made.ok_or_else(|| BundleError::Exists(PathBuf::from(base)))?
        }
    };
    let raw = dir.join(RAW_DIR);
    std::fs::create_dir(&raw).map_err(BundleError::io("cannot create", &raw))?;
    Ok(dir)
}

fn create_new(p: &Path) -> Result<(), BundleError> {
    match std::fs::create_dir(p) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            Err(BundleError::Exists(p.to_path_buf()))
        }
        Err(e) => Err(BundleError::io("cannot create the bundle directory", p)(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_existing_directory_is_never_reused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("b");
        assert_eq!(create_named(Some(&dir), "x").unwrap(), dir);
        assert!(dir.join(RAW_DIR).is_dir());
        let err = create_named(Some(&dir), "x").unwrap_err();
        assert!(matches!(err, BundleError::Exists(_)));
        assert!(err.to_string().contains("never overwritten"), "{err}");
    }
}
