//! Sealing, as every experiment does it: the signing key checked before the first run (so a
//! key that cannot sign here never costs a whole run), and what a sealed run hands back.

use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};

use crate::bundle::sign::{self, SignError};

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
