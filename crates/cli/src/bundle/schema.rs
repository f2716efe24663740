//! What wrote a bundle, and in which layout: the `kind` (`bench` or `verify`) and
//! `schema_version` of its `environment.json`. `capshim report` and `capshim sign` accept only
//! layouts this capshim derives again ([`derivable`]); any other (an older layout whose
//! derivation is not kept, a newer one, an unknown kind, a field that is not a number) is
//! refused by [`require_derivable`], naming the file and the field, because a relabelled
//! bundle would otherwise turn the check of its derived files off.
//!
//! Bundles written before `environment.json` carried them are bench bundles: their layout
//! is the `schema_version` of their `summary.json` (2), or 1 without one.

use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use super::BundleError;

/// What kind of run wrote a bundle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `capshim bench`.
    Bench,
    /// `capshim verify`.
    Verify,
    /// `capshim selftest`.
    Selftest,
    /// `capshim tune`.
    Tune,
    /// A kind this capshim does not know, as named in `environment.json` (JSON text when it is
    /// not a string).
    Other(String),
}

impl Kind {
    /// The kind's name, as `environment.json` writes it.
    pub fn name(&self) -> &str {
        match self {
            Kind::Bench => "bench",
            Kind::Verify => "verify",
            Kind::Selftest => "selftest",
            Kind::Tune => "tune",
            Kind::Other(name) => name,
        }
    }
}

/// A bundle's kind and layout version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// Which run wrote it.
    pub kind: Kind,
    /// Its layout version; `None` when the field is there but not a whole number.
    pub schema_version: Option<u32>,
    /// The layout version as written (JSON text), or `absent`.
    pub schema_text: String,
    /// The file the layout version was read from (`environment.json`, or `summary.json` for
    /// bundles older than environment.json's field).
    pub schema_file: &'static str,
    /// The capshim version that wrote it, when recorded.
    pub capshim_version: Option<String>,
}

impl Header {
    /// The layout version for messages: the number, or the field's text as written.
    pub fn version_text(&self) -> String {
        self.schema_version
            .map_or_else(|| self.schema_text.clone(), |v| v.to_string())
    }
}

#[derive(Deserialize)]
struct Fields {
    kind: Option<Value>,
    schema_version: Option<Value>,
    capshim_version: Option<Value>,
}

#[derive(Deserialize)]
struct SummaryFields {
    schema_version: Option<Value>,
}

/// Reads the header of the bundle `dir` (after its checksums were checked).
///
/// # Errors
/// [`BundleError::NotABundle`] when `environment.json` is missing or not a JSON object;
/// [`BundleError::Io`] with the OS error when it cannot be read.
pub fn read_header(dir: &Path) -> Result<Header, BundleError> {
    let path = dir.join("environment.json");
    let not_a_bundle = |why: String| BundleError::NotABundle {
        path: dir.to_path_buf(),
        why,
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(not_a_bundle("it has no environment.json".into()));
        }
        Err(e) => return Err(BundleError::io("cannot read", &path)(e)),
    };
    let fields: Fields = serde_json::from_str(&text)
        .map_err(|e| not_a_bundle(format!("environment.json is not a bundle record: {e}")))?;
    let kind = match &fields.kind {
        None => Kind::Bench,
        Some(Value::String(s)) if s == "bench" => Kind::Bench,
        Some(Value::String(s)) if s == "verify" => Kind::Verify,
        Some(Value::String(s)) if s == "selftest" => Kind::Selftest,
        Some(Value::String(s)) if s == "tune" => Kind::Tune,
        Some(Value::String(s)) => Kind::Other(s.clone()),
        Some(other) => Kind::Other(other.to_string()),
    };
    let (schema_file, value) = match fields.schema_version {
        Some(v) => ("environment.json", Some(v)),
        // Before environment.json carried it: the summary's, or the first layout.
        None => (
            "summary.json",
            std::fs::read_to_string(dir.join("summary.json"))
                .ok()
                .and_then(|t| serde_json::from_str::<SummaryFields>(&t).ok())
                .and_then(|s| s.schema_version),
        ),
    };
    let (schema_version, schema_text) = match &value {
        Some(v) => (
            v.as_u64().and_then(|n| u32::try_from(n).ok()),
            v.to_string(),
        ),
        None => (Some(1), "absent".to_string()),
    };
    Ok(Header {
        kind,
        schema_version,
        schema_text,
        schema_file: if value.is_some() {
            schema_file
        } else {
            "environment.json"
        },
        capshim_version: match fields.capshim_version {
            Some(Value::String(s)) => Some(s),
            _ => None,
        },
    })
}

/// The layouts of `kind` this capshim derives again, oldest first (empty for a kind it does
/// not know). docs/bundles.md says why each other layout it ever wrote is not.
pub fn derivable(kind: &Kind) -> &'static [u32] {
    match kind {
        Kind::Bench => &[5, crate::analysis::SCHEMA_VERSION],
        Kind::Verify => &[1, 6],
        // The selftest's layouts (crates/cli/src/selftest/bundle.rs), named here so that bundle
        // imports nothing above it; report's test holds the newest among them.
        Kind::Selftest => &[1, 2],
        // The tune layout (crates/cli/src/tune/manifest.rs); report's test holds it.
        Kind::Tune => &[1],
        Kind::Other(_) => &[],
    }
}

/// Why the layouts an earlier capshim wrote are not derived again, by kind and version.
fn retired(kind: &Kind, version: u32) -> Option<&'static str> {
    match (kind, version) {
        (Kind::Bench, 1) => Some(
            "bench layout 1 (bootstrap intervals) recorded no list of the raw files each figure \
             came from, so nothing can be derived from them",
        ),
        (Kind::Bench, 2 | 3) => Some(
            "bench layouts 2 and 3 (Student's t intervals on rounds run in a fixed order) are no \
             longer computed by this capshim",
        ),
        (Kind::Bench, 4) => Some(
            "bench layout 4 (signed-rank intervals, before the rounds-needed estimate and the \
             warnings of layout 5) is no longer computed by this capshim",
        ),
        _ => None,
    }
}

/// Refuses the bundle `dir` unless this capshim derives its layout again: an unknown kind, a
/// `schema_version` that is not a number or not a layout of that kind this capshim derives.
///
/// # Errors
/// [`BundleError::Underivable`] naming the file and the field (exit code 3).
pub fn require_derivable(dir: &Path, header: &Header) -> Result<(), BundleError> {
    let known = derivable(&header.kind);
    let writer = header
        .capshim_version
        .as_deref()
        .map_or_else(String::new, |v| {
            format!(" (written, it says, by capshim {v})")
        });
    let (file, field, found, why) = match (&header.kind, header.schema_version) {
        (Kind::Other(name), _) => (
            "environment.json",
            "kind",
            name.clone(),
            "this capshim knows only bench and verify bundles".to_string(),
        ),
        (_, Some(v)) if known.contains(&v) => return Ok(()),
        (kind, Some(v)) => (
            header.schema_file,
            "schema_version",
            header.schema_text.clone(),
            match retired(kind, v) {
                Some(why) => format!(
                    "{why}; it derives {} bundles of schema_version {}",
                    kind.name(),
                    list(known)
                ),
                None => format!(
                    "this capshim never wrote a {} bundle of that layout; it derives \
                     schema_version {}",
                    kind.name(),
                    list(known)
                ),
            },
        ),
        (kind, None) => (
            header.schema_file,
            "schema_version",
            header.schema_text.clone(),
            format!(
                "not a layout number; this capshim derives {} bundles of schema_version {}",
                kind.name(),
                list(known)
            ),
        ),
    };
    Err(BundleError::Underivable {
        file: dir.join(file),
        field,
        found,
        why: format!("{why}{writer}"),
    })
}

fn list(versions: &[u32]) -> String {
    let texts: Vec<String> = versions.iter().map(u32::to_string).collect();
    texts.join(", ")
}

/// The line `capshim report --as-written` prints first on stdout, and the note on stderr:
/// what is shown, unchecked, and why.
pub fn unverified_mark(dir: &Path, shown: &str, why: &BundleError) -> String {
    format!(
        "UNVERIFIED: {} is shown as written ({shown}): its checksums were checked, its derived \
         files were NOT derived again: {why}",
        dir.display()
    )
}

/// The text of `dir/file` as written, to show a bundle of another layout.
///
/// # Errors
/// [`BundleError::NotABundle`] when the bundle has no such file; [`BundleError::Io`] when it
/// cannot be read.
pub fn as_written(dir: &Path, file: &str) -> Result<String, BundleError> {
    let path = dir.join(file);
    std::fs::read_to_string(&path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            BundleError::NotABundle {
                path: dir.to_path_buf(),
                why: format!("it has no {file}"),
            }
        } else {
            BundleError::io("cannot read", &path)(e)
        }
    })
}

/// Compares the derived files of the bundle `dir` with `expected` (each file's name and the
/// text its raw files derive to), in order; `tool` is the command that wrote the bundle.
///
/// # Errors
/// [`BundleError::Mismatch`] naming the first file that differs or is gone;
/// [`BundleError::Io`] with the OS error when one cannot be read.
pub fn compare_derived(
    dir: &Path,
    tool: &'static str,
    expected: &[(&'static str, String)],
) -> Result<(), BundleError> {
    for (file, text) in expected {
        let path = dir.join(file);
        let same = match std::fs::read(&path) {
            Ok(bytes) => bytes == text.as_bytes(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
            Err(e) => return Err(BundleError::io("cannot read", &path)(e)),
        };
        if !same {
            return Err(BundleError::Mismatch {
                path: dir.to_path_buf(),
                file,
                tool,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(d: &Path) -> String {
        let h = read_header(d).unwrap();
        require_derivable(d, &h).unwrap_err().to_string()
    }

    #[test]
    fn headers_of_every_layout() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        let err = read_header(d).unwrap_err().to_string();
        assert!(err.contains("it has no environment.json"), "{err}");
        std::fs::write(d.join("environment.json"), "[1]").unwrap();
        assert!(matches!(
            read_header(d).unwrap_err(),
            BundleError::NotABundle { .. }
        ));
        // A bench bundle before environment.json had a header: layout 1, refused.
        std::fs::write(d.join("environment.json"), r#"{"capshim_version":"0.1.0"}"#).unwrap();
        assert_eq!(read_header(d).unwrap().schema_version, Some(1));
        let err = refusal(d);
        assert!(
            err.contains("environment.json: schema_version absent"),
            "{err}"
        );
        assert!(err.contains("bench layout 1"), "{err}");
        // Its summary's layout.
        std::fs::write(d.join("summary.json"), r#"{"schema_version":2,"rows":[]}"#).unwrap();
        let h = read_header(d).unwrap();
        assert_eq!((h.kind.clone(), h.schema_version), (Kind::Bench, Some(2)));
        let err = refusal(d);
        assert!(err.contains("summary.json: schema_version 2"), "{err}");
        assert!(err.contains("written, it says, by capshim 0.1.0"), "{err}");
        assert!(err.contains("--as-written"), "{err}");
        std::fs::write(
            d.join("environment.json"),
            r#"{"kind":"verify","schema_version":1}"#,
        )
        .unwrap();
        let h = read_header(d).unwrap();
        assert_eq!(h.kind, Kind::Verify);
        require_derivable(d, &h).unwrap();
        std::fs::write(
            d.join("environment.json"),
            r#"{"kind":"x","schema_version":9}"#,
        )
        .unwrap();
        let h = read_header(d).unwrap();
        assert_eq!(h.kind, Kind::Other("x".into()));
        assert!(refusal(d).contains("environment.json: kind x: this capshim knows only"));
    }

    /// Every layout this capshim ever wrote is derived or refused with its reason; a relabel to
    /// a layout it never wrote, or to a field that is not a number, is refused too.
    #[test]
    fn only_derivable_layouts_pass() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        let current = crate::analysis::SCHEMA_VERSION;
        for (kind, v, ok, says) in [
            ("bench", current.to_string(), true, ""),
            ("bench", "4".into(), false, "bench layout 4"),
            ("bench", "3".into(), false, "layouts 2 and 3"),
            (
                "bench",
                "99".into(),
                false,
                "never wrote a bench bundle of that layout",
            ),
            ("bench", "\"5\"".into(), false, "not a layout number"),
            ("bench", "-5".into(), false, "not a layout number"),
            ("verify", "1".into(), true, ""),
            ("verify", "2".into(), false, "never wrote a verify bundle"),
            ("verify", "5".into(), false, "never wrote a verify bundle"),
        ] {
            std::fs::write(
                d.join("environment.json"),
                format!(r#"{{"kind":"{kind}","schema_version":{v}}}"#),
            )
            .unwrap();
            let h = read_header(d).unwrap();
            let got = require_derivable(d, &h);
            assert_eq!(got.is_ok(), ok, "{kind} {v}: {got:?}");
            if let Err(e) = got {
                assert!(e.untrusted(), "{e}");
                let e = e.to_string();
                assert!(e.contains(&format!("schema_version {v}")), "{e}");
                assert!(e.contains(says), "{e}");
            }
        }
        std::fs::write(
            d.join("environment.json"),
            r#"{"kind":7,"schema_version":1}"#,
        )
        .unwrap();
        assert!(refusal(d).contains("kind 7"));
    }

    #[test]
    fn derived_files_are_compared_byte_for_byte() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        std::fs::write(d.join("a.md"), "a\n").unwrap();
        std::fs::write(d.join("b.csv"), "b\n").unwrap();
        let expected = |b: &str| vec![("a.md", "a\n".to_string()), ("b.csv", b.to_string())];
        compare_derived(d, "bench", &expected("b\n")).unwrap();
        let err = compare_derived(d, "bench", &expected("b \n")).unwrap_err();
        assert!(
            matches!(err, BundleError::Mismatch { file: "b.csv", .. }),
            "{err}"
        );
        assert!(err.to_string().contains("b.csv does not match"), "{err}");
        std::fs::remove_file(d.join("b.csv")).unwrap();
        assert!(compare_derived(d, "bench", &expected("b\n")).is_err());
    }
}
