//! Reading a bundle back into the analysis inputs, the same way for `bench` (right after the
//! runs) and for `report` (later, after verifying the checksums).

use std::path::Path;

use super::BundleError;
use super::manifest::{EnvironmentFile, FORMAT, Manifest, ManifestRun};
use super::workload::{Workload, metric_value};
use crate::analysis::input::ProcessRun;
use crate::analysis::{ArmInput, Role, RunInput};
use crate::launch::status::{StatusEvent, StatusFileError};
use crate::llama::{Activation, BenchRow, MetalReport, read_bench_file};

/// Reads the manifest in `dir/environment.json` (a bench bundle of the current layout).
///
/// # Errors
/// [`BundleError::NotABundle`] when `environment.json` has no readable manifest or the
/// manifest names a file outside the bundle; [`BundleError::Io`] when it cannot be read.
pub fn read_manifest(dir: &Path) -> Result<Manifest, BundleError> {
    let path = dir.join("environment.json");
    let not_a_bundle = |why: String| BundleError::NotABundle {
        path: dir.to_path_buf(),
        why,
    };
    let text = std::fs::read_to_string(&path).map_err(BundleError::io("cannot read", &path))?;
    let file: EnvironmentFile = serde_json::from_str(&text).map_err(|e| {
        not_a_bundle(format!(
            "environment.json has no readable `bundle` manifest: {e}"
        ))
    })?;
    let manifest = file
        .bundle
        .ok_or_else(|| not_a_bundle("environment.json has no `bundle` manifest".into()))?;
    if let Some(field) = workload_disagrees(file.workload.as_ref(), manifest.workload.as_ref()) {
        return Err(BundleError::Disagrees { file: path, field });
    }
    if manifest.format != FORMAT {
        return Err(not_a_bundle(format!(
            "manifest format {} is not {FORMAT}: use the capshim version that wrote it",
            manifest.format
        )));
    }
    for run in manifest.arms.iter().flat_map(|a| &a.runs) {
        let paths = [Some(&run.json), run.stderr.as_ref(), run.status.as_ref()];
        for rel in paths.into_iter().flatten() {
            let inside = !rel.is_empty()
                && Path::new(rel)
                    .components()
                    .all(|c| matches!(c, std::path::Component::Normal(_)));
            if !inside {
                return Err(not_a_bundle(format!(
                    "its manifest names {rel:?}, outside the bundle; only files inside it are checked"
                )));
            }
        }
    }
    Ok(manifest)
}

/// The first field in which `environment.json`'s top-level `workload` (`copy`) differs from
/// the manifest's (`recorded`), `*` when only one of them is there; `None` when they agree.
fn workload_disagrees(
    copy: Option<&serde_json::Value>,
    recorded: Option<&Workload>,
) -> Option<String> {
    let recorded = recorded.map(|w| serde_json::to_value(w).expect("serializable"));
    match (copy, recorded) {
        (None, None) => None,
        (Some(copy), Some(recorded)) => {
            let keys = |v: &serde_json::Value| -> Vec<String> {
                v.as_object()
                    .map(|o| o.keys().cloned().collect())
                    .unwrap_or_default()
            };
            let mut fields = keys(copy);
            fields.extend(keys(&recorded));
            fields.sort();
            fields.dedup();
            if !copy.is_object() {
                return Some("*".into());
            }
            // Absent and a default value are one: `regex` absent is null, `lower_is_better`
            // absent is false, as the manifest reads them.
            let norm = |v: Option<&serde_json::Value>| match v {
                None | Some(serde_json::Value::Null) => serde_json::Value::Null,
                Some(serde_json::Value::Bool(false)) => serde_json::Value::Null,
                Some(v) => v.clone(),
            };
            fields
                .into_iter()
                .find(|f| norm(copy.get(f)) != norm(recorded.get(f)))
        }
        _ => Some("*".into()),
    }
}

/// The bench processes in `dir/environment.json`'s `runs`, in the order run, arm names as
/// [`load_arms`] gives them with `prefix` (`<prefix>/<arm>`): what schema 6's carry-over
/// estimate and unequal-durations check read.
///
/// # Errors
/// As [`read_manifest`]: the file cannot be read or is not an `environment.json`.
pub fn read_runs(dir: &Path, prefix: Option<&str>) -> Result<Vec<ProcessRun>, BundleError> {
    let path = dir.join("environment.json");
    let text = std::fs::read_to_string(&path).map_err(BundleError::io("cannot read", &path))?;
    let file: EnvironmentFile =
        serde_json::from_str(&text).map_err(|e| BundleError::NotABundle {
            path: dir.to_path_buf(),
            why: format!("environment.json has no readable `runs`: {e}"),
        })?;
    Ok(file
        .runs
        .into_iter()
        .filter_map(|r| {
            Some(ProcessRun {
                arm: match prefix {
                    Some(p) => format!("{p}/{}", r.arm),
                    None => r.arm,
                },
                round: r.round?,
                seconds: r.seconds,
            })
        })
        .collect())
}

/// A raw file of a bundle that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A llama-bench output is unreadable.
    #[error(transparent)]
    Bench(#[from] crate::llama::bench_json::ParseError),
    /// A stderr capture or status file cannot be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: std::path::PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A status file is not the shim's.
    #[error(transparent)]
    Status(#[from] StatusFileError),
    /// A `bench --command` run's value cannot be read from its primary files.
    #[error("{what}: {why}")]
    Value {
        /// The run: its stdout file, or `environment.json`.
        what: String,
        /// Why.
        why: String,
    },
}

/// A raw text file, bytes that are not UTF-8 replaced: a command's output may hold binary
/// data, and the text around it is still read (a metric found in it, `capshim:` lines).
fn read(path: std::path::PathBuf) -> Result<String, LoadError> {
    std::fs::read(&path)
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
        .map_err(|source| LoadError::Read { path, source })
}

/// The analysis inputs of a bundle's arms. With `prefix`, arm names become `<prefix>/<arm>`
/// and the arms form one group (several bundles side by side). The arms capshim ran (all but
/// a host baseline) show the model file the manifest names.
///
/// # Errors
/// [`LoadError`] naming any raw file that cannot be read or parsed.
pub fn load_arms(
    dir: &Path,
    manifest: &Manifest,
    prefix: Option<&str>,
) -> Result<Vec<ArmInput>, LoadError> {
    load_arms_with(dir, manifest, prefix, None)
}

/// As [`load_arms`], with the bundle's processes in the order run (`runs`, arm names without
/// a prefix) given rather than read from `environment.json`: the seal derives before it
/// writes that file, and a `bench --command` bundle's wall times are those of its processes.
///
/// # Errors
/// As [`load_arms`].
pub fn load_arms_with(
    dir: &Path,
    manifest: &Manifest,
    prefix: Option<&str>,
    runs: Option<&[ProcessRun]>,
) -> Result<Vec<ArmInput>, LoadError> {
    let mut arms = Vec::new();
    // A command's workload: its expression, and each run's wall time as recorded.
    let command = match &manifest.workload {
        Some(w) => {
            let re = w.regex().map_err(|e| LoadError::Value {
                what: "the workload's --metric".into(),
                why: e.to_string(),
            })?;
            let runs = match runs {
                Some(r) => r.to_vec(),
                None => read_runs(dir, None).map_err(|e| LoadError::Value {
                    what: "environment.json".into(),
                    why: e.to_string(),
                })?,
            };
            Some((w, re, runs))
        }
        None => None,
    };
    for arm in &manifest.arms {
        let role = match arm.role.as_str() {
            "stock" => Role::Stock,
            "host" => Role::Host,
            _ => Role::Other,
        };
        let mut runs = Vec::new();
        let mut metal = Vec::new();
        let mut activations = Vec::new();
        // A run --keep-going recorded as failed has no result; an arm with no other run is
        // left out (the bench's derivation says it failed).
        for run in arm.runs.iter().filter(|r| r.failed.is_none()) {
            let mut rows = match &command {
                Some((workload, re, seconds)) => {
                    vec![command_row(
                        dir,
                        workload,
                        re.as_ref(),
                        seconds,
                        &arm.name,
                        run,
                    )?]
                }
                None => read_bench_file(&dir.join(&run.json))?,
            };
            if let (Some(model), false) = (&manifest.model, arm.role == "host") {
                for row in &mut rows {
                    row.model.filename.clone_from(model);
                }
            }
            runs.push(RunInput {
                round: run.round,
                path: dir.join(&run.json),
                rows,
            });
            let stderr = match &run.stderr {
                Some(rel) => read(dir.join(rel))?,
                None => String::new(),
            };
            if run.stderr.is_some() {
                metal.push((run.round, MetalReport::parse(&stderr)));
            }
            let events = match &run.status {
                Some(rel) => StatusEvent::parse_file(rel, &read(dir.join(rel))?)?,
                None => Vec::new(),
            };
            if run.stderr.is_some() {
                activations.push(Activation::from_evidence(arm.shim, &events, &stderr));
            }
        }
        if runs.is_empty() && !arm.runs.is_empty() {
            continue;
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
            args: arm.args.clone(),
            metal,
            activation: Activation::combine(&activations),
            // A host baseline's processes ran on another machine, in none of the rounds.
            randomized: arm.role != "host",
        });
    }
    Ok(arms)
}

/// The row of one `bench --command` run of `arm`: its wall time from `runs` (the processes
/// recorded in `environment.json`), or the value `re` finds in its output files.
fn command_row(
    dir: &Path,
    workload: &Workload,
    re: Option<&regex::Regex>,
    runs: &[ProcessRun],
    arm: &str,
    run: &ManifestRun,
) -> Result<BenchRow, LoadError> {
    let value = match re {
        None => runs
            .iter()
            .find(|p| p.arm == arm && p.round == run.round)
            .and_then(|p| p.seconds)
            .ok_or_else(|| LoadError::Value {
                what: "environment.json".into(),
                why: format!(
                    "no wall time recorded for arm {arm} round {} in `runs`",
                    run.round
                ),
            })?,
        Some(re) => {
            let stdout = read(dir.join(&run.json))?;
            let stderr = match &run.stderr {
                Some(rel) => read(dir.join(rel))?,
                None => String::new(),
            };
            metric_value(re, &stdout, &stderr).map_err(|why| LoadError::Value {
                what: run.json.clone(),
                why,
            })?
        }
    };
    Ok(workload.row(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_paths_must_stay_inside_the_bundle() {
        let tmp = tempfile::tempdir().unwrap();
        let manifest = |json: &str| {
            format!(
                r#"{{"schema_version":3,"bundle":{{"format":1,"arms":[{{"name":"stock","role":"stock","profile":"stock","shim":false,
                "runs":[{{"round":1,"json":{json},"stderr":null,"status":null}}]}}]}}}}"#
            )
        };
        let env = tmp.path().join("environment.json");
        std::fs::write(&env, manifest("\"raw/stock-r1.json\"")).unwrap();
        assert_eq!(
            read_manifest(tmp.path()).unwrap().arms[0].runs[0].json,
            "raw/stock-r1.json"
        );
        for bad in [
            "\"../outside.json\"",
            "\"/etc/passwd\"",
            "\"raw/../../x\"",
            "\"\"",
        ] {
            std::fs::write(&env, manifest(bad)).unwrap();
            let err = read_manifest(tmp.path()).unwrap_err().to_string();
            assert!(err.contains("outside the bundle"), "{bad}: {err}");
        }
        std::fs::write(&env, "{}").unwrap();
        let err = read_manifest(tmp.path()).unwrap_err().to_string();
        assert!(err.contains("is not a capshim evidence bundle"), "{err}");
        assert!(err.contains("no `bundle` manifest"), "{err}");
    }
}
