//! What wrote a bundle, and in which layout: the `kind` (`bench` or `verify`) and
//! `schema_version` of its `environment.json`, so that `capshim report` re-derives only the
//! layouts it knows and shows any other as written, saying so.
//!
//! Bundles written before `environment.json` carried them are bench bundles: their layout
//! is the `schema_version` of their `summary.json` (2), or 1 without one.

use std::path::Path;

use serde::Deserialize;

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
    /// A kind this capshim does not know, as named in `environment.json`.
    Other(String),
}

impl Kind {
    /// The kind's name, as `environment.json` writes it.
    pub fn name(&self) -> &str {
        match self {
            Kind::Bench => "bench",
            Kind::Verify => "verify",
            Kind::Selftest => "selftest",
            Kind::Other(name) => name,
        }
    }
}

/// A bundle's kind and layout version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// Which run wrote it.
    pub kind: Kind,
    /// Its layout version.
    pub schema_version: u32,
    /// The capshim version that wrote it, when recorded.
    pub capshim_version: Option<String>,
}

#[derive(Deserialize)]
struct Fields {
    kind: Option<String>,
    schema_version: Option<u32>,
    capshim_version: Option<String>,
}

#[derive(Deserialize)]
struct SummaryFields {
    schema_version: Option<u32>,
}

/// Reads the header of the bundle `dir` (after its checksums were checked).
///
/// # Errors
/// [`BundleError::NotABundle`] when `environment.json` is missing or not a bundle record;
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
    let kind = match fields.kind.as_deref() {
        None | Some("bench") => Kind::Bench,
        Some("verify") => Kind::Verify,
        Some("selftest") => Kind::Selftest,
        Some(other) => Kind::Other(other.to_string()),
    };
    let schema_version = match fields.schema_version {
        Some(v) => v,
        // Before environment.json carried it: the summary's, or the first layout.
        None => std::fs::read_to_string(dir.join("summary.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<SummaryFields>(&t).ok())
            .and_then(|s| s.schema_version)
            .unwrap_or(1),
    };
    Ok(Header {
        kind,
        schema_version,
        capshim_version: fields.capshim_version,
    })
}

/// The note for a bundle of a layout this capshim does not derive (`known` is the one it
/// does, `None` for an unknown kind): what was checked, what was not, and what is shown.
pub fn other_schema_note(dir: &Path, header: &Header, known: Option<u32>, shown: &str) -> String {
    let writer = header
        .capshim_version
        .as_deref()
        .map_or_else(String::new, |v| format!(" (written by capshim {v})"));
    let this = match known {
        Some(k) => format!(
            "this capshim derives {} bundles of schema_version {k}",
            header.kind.name()
        ),
        None => format!("this capshim does not know {} bundles", header.kind.name()),
    };
    format!(
        "{} is a {} bundle of schema_version {}{writer}; {this}. Its checksums were checked (and \
         its signature, when asked), but its derived files were NOT derived again from its raw \
         files: below is its own {shown}, as written; a capshim of its schema checks them all",
        dir.display(),
        header.kind.name(),
        header.schema_version
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
        // A bench bundle before environment.json had a header: the summary's layout.
        std::fs::write(d.join("environment.json"), r#"{"capshim_version":"0.1.0"}"#).unwrap();
        assert_eq!(read_header(d).unwrap().schema_version, 1);
        std::fs::write(d.join("summary.json"), r#"{"schema_version":2,"rows":[]}"#).unwrap();
        let h = read_header(d).unwrap();
        assert_eq!((h.kind.clone(), h.schema_version), (Kind::Bench, 2));
        let note = other_schema_note(d, &h, Some(3), "report.md");
        assert!(note.contains("bench bundle of schema_version 2 (written by capshim 0.1.0)"));
        assert!(note.contains("NOT derived again"), "{note}");
        std::fs::write(
            d.join("environment.json"),
            r#"{"kind":"verify","schema_version":1}"#,
        )
        .unwrap();
        assert_eq!(read_header(d).unwrap().kind, Kind::Verify);
        std::fs::write(
            d.join("environment.json"),
            r#"{"kind":"x","schema_version":9}"#,
        )
        .unwrap();
        let h = read_header(d).unwrap();
        assert_eq!(h.kind, Kind::Other("x".into()));
        assert!(other_schema_note(d, &h, None, "report.md").contains("does not know x bundles"));
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
