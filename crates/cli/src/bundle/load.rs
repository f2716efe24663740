//! Reading a bundle back into the analysis inputs, the same way for `bench` (right after the
//! runs) and for `report` (later, after verifying the checksums).

use std::path::Path;

use super::BundleError;
use super::manifest::{FORMAT, Manifest, SummaryFile};
use crate::analysis::{ArmInput, Role, RunInput};
use crate::launch::status::{StatusEvent, StatusFileError};
use crate::llama::{Activation, MetalReport, read_bench_file};

/// Reads `dir/summary.json`'s manifest.
///
/// # Errors
/// [`BundleError::NotABundle`] when `summary.json` is missing or has no readable manifest.
pub fn read_manifest(dir: &Path) -> Result<Manifest, BundleError> {
    let path = dir.join("summary.json");
    let text = std::fs::read_to_string(&path).map_err(|e| BundleError::NotABundle {
        path: dir.to_path_buf(),
        why: format!("cannot read summary.json: {e}"),
    })?;
    let file: SummaryFile = serde_json::from_str(&text).map_err(|e| BundleError::NotABundle {
        path: dir.to_path_buf(),
        why: format!("summary.json has no readable `bundle` manifest: {e}"),
    })?;
    if file.bundle.format != FORMAT {
        return Err(BundleError::NotABundle {
            path: dir.to_path_buf(),
            why: format!(
                "manifest format {} is not {FORMAT}: use the capshim version that wrote it",
                file.bundle.format
            ),
        });
    }
    for run in file.bundle.arms.iter().flat_map(|a| &a.runs) {
        let paths = [Some(&run.json), run.stderr.as_ref(), run.status.as_ref()];
        for rel in paths.into_iter().flatten() {
            let inside = Path::new(rel)
                .components()
                .all(|c| matches!(c, std::path::Component::Normal(_)));
            if !inside {
                return Err(BundleError::NotABundle {
                    path: dir.to_path_buf(),
                    why: format!(
                        "its manifest names {rel:?}, outside the bundle; only files inside it are checked"
                    ),
                });
            }
        }
    }
    Ok(file.bundle)
}

/// A raw file of a bundle that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A llama-bench output is unreadable.
    #[error(transparent)]
    Bench(#[from] crate::llama::bench_json::ParseError),
    /// A stderr capture is unreadable.
    #[error("cannot read {path}: {source}; the bundle is incomplete: rerun `capshim bench`")]
    Stderr {
        /// The file.
        path: std::path::PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A status file is not the shim's.
    #[error(transparent)]
    Status(#[from] StatusFileError),
}

/// The analysis inputs of a bundle's arms. With `prefix`, arm names become `<prefix>/<arm>`
/// and the arms form one group (several bundles side by side).
///
/// # Errors
/// [`LoadError`] naming any raw file that cannot be read or parsed.
pub fn load_arms(
    dir: &Path,
    manifest: &Manifest,
    prefix: Option<&str>,
) -> Result<Vec<ArmInput>, LoadError> {
    let mut arms = Vec::new();
    for arm in &manifest.arms {
        let role = match arm.role.as_str() {
            "stock" => Role::Stock,
            "host" => Role::Host,
            _ => Role::Other,
        };
        let mut runs = Vec::new();
        let mut metal = Vec::new();
        let mut activations = Vec::new();
        for run in &arm.runs {
            let rows = read_bench_file(&dir.join(&run.json))?;
            runs.push(RunInput {
                round: run.round,
                path: dir.join(&run.json),
                rows,
            });
            let stderr = match &run.stderr {
                Some(rel) => {
                    let path = dir.join(rel);
                    std::fs::read_to_string(&path)
                        .map_err(|source| LoadError::Stderr { path, source })?
                }
                None => String::new(),
            };
            if run.stderr.is_some() {
                metal.push((run.round, MetalReport::parse(&stderr)));
            }
            let events = match &run.status {
                Some(rel) => StatusEvent::read_file(&dir.join(rel))?,
                None => Vec::new(),
            };
            if run.stderr.is_some() {
                activations.push(Activation::from_evidence(arm.shim, &events, &stderr));
            }
        }
        let name = match prefix {
            Some(p) => format!("{p}/{}", arm.name),
            None => arm.name.clone(),
        };
        arms.push(ArmInput {
            name,
            role,
            group: prefix.map(str::to_string),
            reference_for_all: false,
            runs,
            metal,
            activation: Activation::combine(&activations),
        });
    }
    Ok(arms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_paths_must_stay_inside_the_bundle() {
        let tmp = tempfile::tempdir().unwrap();
        let manifest = |json: &str| {
            format!(
                r#"{{"rows":[],"bundle":{{"format":1,"arms":[{{"name":"stock","role":"stock","profile":"stock","shim":false,
                "runs":[{{"round":1,"json":{json},"stderr":null,"status":null}}]}}]}}}}"#
            )
        };
        std::fs::write(
            tmp.path().join("summary.json"),
            manifest("\"raw/stock-r1.json\""),
        )
        .unwrap();
        assert_eq!(
            read_manifest(tmp.path()).unwrap().arms[0].runs[0].json,
            "raw/stock-r1.json"
        );
        for bad in ["\"../outside.json\"", "\"/etc/passwd\"", "\"raw/../../x\""] {
            std::fs::write(tmp.path().join("summary.json"), manifest(bad)).unwrap();
            let err = read_manifest(tmp.path()).unwrap_err().to_string();
            assert!(err.contains("outside the bundle"), "{bad}: {err}");
        }
        std::fs::write(tmp.path().join("summary.json"), "{}").unwrap();
        let err = read_manifest(tmp.path()).unwrap_err().to_string();
        assert!(err.contains("is not a capshim evidence bundle"), "{err}");
    }
}
