//! Opening an evidence bundle to report on it (or to sign it), in the order that makes each
//! check mean something: `SHA256SUMS` over every file; the signature over `SHA256SUMS` when
//! asked; then the layout (kind and `schema_version`) must be one this capshim derives, and
//! every derived file is derived again from the raw files and compared. A bundle of another
//! layout is refused, or, when the reader asks for it (`report --as-written`), shown as
//! written and marked unverified. `capshim sign` opens bundles through the same function.

use std::path::Path;

use crate::bench;
use crate::bundle::schema::{self, Header, Kind};
use crate::bundle::{self, BundleError, Manifest, SIG_FILE, sign};
use crate::selftest;
use crate::tune;
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
    /// A bench bundle of a layout this capshim derives: its manifest (its derived files
    /// match) and its layout.
    Bench(Manifest, u32),
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
    /// A tune bundle of this capshim's layout: its `report.md` and `summary.json`.
    Tune {
        /// `report.md`.
        markdown: String,
        /// `summary.json`.
        summary_json: String,
    },
    /// A bundle of a layout this capshim does not derive, opened with `as_written`: only its
    /// checksums (and signature) were checked.
    AsWritten {
        /// Its kind and layout.
        header: Header,
        /// Why it is not derived ([`BundleError::Underivable`]).
        why: BundleError,
    },
}

impl Opened {
    /// What the bundle is, in words, for messages about a bundle reported on its own.
    pub fn what(&self) -> String {
        match self {
            Opened::Verify { .. } => "a `capshim verify` bundle".to_string(),
            Opened::Selftest { .. } => "a `capshim selftest` bundle".to_string(),
            Opened::Tune { .. } => "a `capshim tune` bundle".to_string(),
            Opened::AsWritten { header, .. } => format!(
                "a {} bundle of schema_version {}, shown as written",
                header.kind.name(),
                header.version_text()
            ),
            Opened::Bench(..) => "a `capshim bench` bundle".to_string(),
        }
    }
}

/// Checks the bundle `dir`; notes (a signature checked, or present but not asked about) go to
/// stderr. A bundle of a layout this capshim does not derive is refused, unless `as_written`,
/// which returns it as [`Opened::AsWritten`] once its checksums (and signature) hold.
///
/// # Errors
/// [`BundleError`]: see [`BundleError::untrusted`] for which mean exit code 3.
pub fn open(
    dir: &Path,
    signers: Option<&Signers>,
    as_written: bool,
) -> Result<Opened, BundleError> {
    bundle::verify(dir)?;
    match signers {
        Some(s) => {
            let said = sign::verify(dir, s.file, s.identity)?;
            crate::term::note(format!("{}: {said}", dir.display()));
        }
        None if dir.join(SIG_FILE).is_file() => crate::term::line(format!(
            "capshim: note: {} is signed ({SIG_FILE}); give --allowed-signers FILE --identity ID \
             to check who signed it",
            dir.display()
        )),
        None => {}
    }
    let header = schema::read_header(dir)?;
    if let Err(why) = schema::require_derivable(dir, &header) {
        return if as_written {
            Ok(Opened::AsWritten { header, why })
        } else {
            Err(why)
        };
    }
    Ok(match header.kind {
        Kind::Bench => {
            let schema = header.schema_version.expect("a derivable layout");
            Opened::Bench(bench::check::check(dir, schema)?.0, schema)
        }
        Kind::Verify => {
            let (markdown, summary_json) =
                verify::check::check(dir, header.schema_version.expect("a derivable layout"))?;
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
        Kind::Tune => {
            let (markdown, summary_json) = tune::check::check(dir)?;
            Opened::Tune {
                markdown,
                summary_json,
            }
        }
        Kind::Other(_) => unreachable!("an unknown kind has no derivable layout"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The layouts the bundle check derives are the ones bench, verify and selftest write now.
    #[test]
    fn the_derivable_layouts_include_the_ones_written_now() {
        let bench = schema::derivable(&Kind::Bench);
        assert!(
            bench.contains(&crate::analysis::SCHEMA_VERSION),
            "{bench:?}"
        );
        let verify = schema::derivable(&Kind::Verify);
        assert!(
            verify.contains(&verify::manifest::SCHEMA_VERSION),
            "{verify:?}"
        );
        let selftest = schema::derivable(&Kind::Selftest);
        assert!(
            selftest.contains(&selftest::bundle::SCHEMA_VERSION) && selftest.contains(&1),
            "{selftest:?}"
        );
        assert_eq!(
            schema::derivable(&Kind::Tune),
            [tune::manifest::SCHEMA_VERSION]
        );
    }
}
