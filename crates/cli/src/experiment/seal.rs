//! Sealing, as every experiment does it: the signing key checked before the first run (so a
//! key that cannot sign here never costs a whole run), and what a sealed run hands back.

use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::error::{ExperimentError, io};
use crate::bundle::sign::{self, SignError};
use crate::bundle::{self, BundleError};

/// A sealed bundle and the reports its command prints.
pub struct SealedBundle {
    /// The bundle directory.
    pub dir: PathBuf,
    /// `report.md`'s text.
    pub markdown: String,
    /// `summary.json`'s text.
    pub summary_json: String,
}

impl SealedBundle {
    /// The report printed on stdout: `summary.json` with `json`, else `report.md`.
    pub fn report(&self, json: bool) -> &str {
        if json {
            &self.summary_json
        } else {
            &self.markdown
        }
    }
}

/// What a sealed experiment hands back to its command.
pub trait Sealed {
    /// The bundle and its reports.
    fn bundle(&self) -> &SealedBundle;
}

/// Checks, before the first run, that `key` can sign the bundle when it is sealed: ssh-keygen
/// reads it, and it signs without a passphrase (none, or ssh-agent holds it), unless stdin is a
/// terminal where ssh-keygen can ask for one. Returns the key's fingerprint line.
///
/// # Errors
/// [`SignError`]: no ssh-keygen, not a key, or [`SignError::CannotSignUnattended`].
pub fn check_signing_key(key: &Path) -> Result<String, SignError> {
    let fingerprint = sign::check_key(key)?;
    if !std::io::stdin().is_terminal() {
        sign::try_sign_unattended(key)?;
    }
    Ok(fingerprint)
}

/// Seals the bundle `dir`: writes its derived files (name and text, in order), then
/// `environment.json` (`environment`, pretty-printed), then `SHA256SUMS` over every file.
///
/// # Errors
/// When a file cannot be written or `environment` cannot be serialized.
pub fn write_sealed(
    dir: &Path,
    derived: &[(&'static str, String)],
    environment: &impl Serialize,
) -> Result<(), ExperimentError> {
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(io("cannot write", &path))
    };
    for (name, text) in derived {
        write(name, text)?;
    }
    let env =
        serde_json::to_string_pretty(environment).map_err(|source| ExperimentError::Json {
            what: "environment.json",
            source,
        })? + "\n";
    write("environment.json", &env)?;
    bundle::write_sums(dir)?;
    Ok(())
}

/// The manifest of kind `kind` a sealed bundle `dir` keeps under that key of its
/// `environment.json`, for `report` to derive the bundle again from.
///
/// # Errors
/// [`BundleError::Io`] when the file cannot be read; [`BundleError::NotABundle`] when it is not
/// JSON or has no such manifest.
pub fn read_manifest<M: serde::de::DeserializeOwned>(
    dir: &Path,
    kind: &str,
) -> Result<M, BundleError> {
    let not_a_bundle = |why: String| BundleError::NotABundle {
        path: dir.to_path_buf(),
        why,
    };
    let path = dir.join("environment.json");
    let text = std::fs::read_to_string(&path).map_err(BundleError::io("cannot read", &path))?;
    let mut env: serde_json::Map<String, serde_json::Value> = serde_json::from_str(&text)
        .map_err(|e| not_a_bundle(format!("environment.json is not a {kind} record: {e}")))?;
    let manifest = env
        .remove(kind)
        .filter(|v| !v.is_null())
        .ok_or_else(|| not_a_bundle(format!("environment.json has no `{kind}` manifest")))?;
    serde_json::from_value(manifest)
        .map_err(|e| not_a_bundle(format!("environment.json is not a {kind} record: {e}")))
}
