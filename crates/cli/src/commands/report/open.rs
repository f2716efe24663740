//! Opening an evidence bundle to report on it (or to sign it), in the order that makes each
//! check mean something: `SHA256SUMS` over every file; the signature over `SHA256SUMS` when
//! asked; then, for a layout this capshim knows, every derived file derived again from the
//! raw files and compared. A bundle of another layout is shown as written, saying so.

use std::path::Path;

use crate::analysis::SCHEMA_VERSION;
use crate::bench;
use crate::bundle::schema::{self, Header, Kind};
use crate::bundle::{self, BundleError, Manifest, SIG_FILE, sign};
use crate::selftest;
use crate::verify;

/// Who must have signed a bundle: an OpenSSH allowed-signers file and the identity in it.
pub struct Signers<'a> {
    /// The allowed-signers file (ssh-keygen(1), ALLOWED SIGNERS).
    pub file: &'a Path,
    /// The principal the signature must be by.
    pub identity: &'a str,
}

/// A bundle that passed every check this capshim can make.
pub enum Opened {
    /// A bench bundle of this capshim's layout: its manifest (its derived files match).
    Bench(Manifest),
    /// A verify bundle of this capshim's layout: its `report.md` and `summary.json`.
    Verify {
        /// `report.md`.
        markdown: String,
        /// `summary.json`.
        summary_json: String,
    },
    /// A selftest bundle of this capshim's layout: its `report.md` and `checks.json`.
    Selftest {
        /// `report.md`.
        markdown: String,
        /// `checks.json`.
        checks_json: String,
    },
    /// A bundle of another layout: only its checksums (and signature) were checked.
    AsWritten {
        /// Its kind and layout.
        header: Header,
        /// The layout this capshim derives for that kind, if it knows the kind.
        known: Option<u32>,
    },
}

/// The layout this capshim derives for bundles of `kind`.
pub fn known_schema(kind: &Kind) -> Option<u32> {
    match kind {
        Kind::Bench => Some(SCHEMA_VERSION),
        Kind::Verify => Some(verify::manifest::SCHEMA_VERSION),
        Kind::Selftest => Some(selftest::bundle::SCHEMA_VERSION),
        Kind::Other(_) => None,
    }
}

/// Checks the bundle `dir`; notes (a signature checked, or present but not asked about) go to
/// stderr.
///
/// # Errors
/// [`BundleError`]: see [`BundleError::untrusted`] for which mean exit code 3.
pub fn open(dir: &Path, signers: Option<&Signers>) -> Result<Opened, BundleError> {
    bundle::verify(dir)?;
    match signers {
        Some(s) => {
            let said = sign::verify(dir, s.file, s.identity)?;
            crate::term::note(format!("{}: {said}", dir.display()));
        }
        None if dir.join(SIG_FILE).is_file() => eprintln!(
            "capshim: note: {} is signed ({SIG_FILE}); give --allowed-signers FILE --identity ID \
             to check who signed it",
            dir.display()
        ),
        None => {}
    }
    let header = schema::read_header(dir)?;
    let known = known_schema(&header.kind);
    if known != Some(header.schema_version) {
        return Ok(Opened::AsWritten { header, known });
    }
    Ok(match header.kind {
        Kind::Bench => Opened::Bench(bench::check::check(dir)?.0),
        Kind::Verify => {
            let (markdown, summary_json) = verify::check::check(dir)?;
            Opened::Verify {
                markdown,
                summary_json,
            }
        }
        Kind::Selftest => {
            let (markdown, checks_json) = selftest::bundle::check(dir)?;
            Opened::Selftest {
                markdown,
                checks_json,
            }
        }
        Kind::Other(_) => unreachable!("an unknown kind has no known layout"),
    })
}
