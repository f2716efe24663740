//! The bare-metal host's processes for percent of host (`bench --baseline`, repeatable): each
//! llama-bench JSON file is one host process (its `-r` repetitions are that process's
//! samples); a bench bundle made on the host gives its `stock` arm's processes, once the
//! bundle passes the check `capshim report` makes (checksums, layout, every derived file
//! derived again). Every host process must measure one model with one set of settings per
//! test, checked before the first run.

use std::path::{Path, PathBuf};

use crate::analysis::{ArmInput, Role, RunInput, analyze};
use crate::bundle::schema::{self, Kind};
use crate::bundle::sums::sha256_file;
use crate::bundle::{self, BundleError};
use crate::llama::{ModelId, TestKey, gguf, read_bench_file};

/// Why a `--baseline` cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum BaselineError {
    /// A file cannot be read as llama-bench output.
    #[error("--baseline {}: {why}; give the host's llama-bench -o json file", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// A directory that is not a bench bundle passing its check.
    #[error(
        "--baseline {}: {why}; give a bench bundle made on the host that `capshim report {}` \
         accepts, or the host's llama-bench -o json files",
        dir.display(),
        dir.display()
    )]
    Bundle {
        /// The bundle directory.
        dir: PathBuf,
        /// What is wrong (the check's own error).
        why: String,
    },
    /// A directory that cannot be a host: not an evidence bundle, or a bundle without
    /// llama-bench results.
    #[error(
        "--baseline {}: {why}; give a bench bundle of llama-bench made on the host, or the \
         host's llama-bench -o json files",
        dir.display()
    )]
    NotHost {
        /// The directory.
        dir: PathBuf,
        /// What it is.
        why: String,
    },
    /// The host processes cannot be pooled as one arm (different models or settings).
    #[error(
        "--baseline: the host's processes cannot be one baseline: {0}; give host files of one \
         model and one set of llama-bench settings"
    )]
    Mixed(String),
    /// The host measured another model than the bench's.
    #[error(
        "--baseline {}: the host measured {host}, but this bench's model {} is {bench}: percent \
         of host across models is meaningless; give a host measured with the same model file",
        given.display(),
        model.display()
    )]
    Model {
        /// The `--baseline` as given.
        given: PathBuf,
        /// The model the host measured.
        host: String,
        /// The bench's `-m`.
        model: PathBuf,
        /// What the bench's model is.
        bench: String,
    },
}

/// One `--baseline` as given: a file, or a host bench bundle.
#[derive(Clone, Debug, PartialEq)]
pub struct HostSource {
    /// The file or directory as given.
    pub given: PathBuf,
    /// Its host processes' llama-bench JSON files, in order (a bundle's stock runs by round).
    pub files: Vec<PathBuf>,
    /// A bundle's `SHA256SUMS`, whose checksum is recorded with the files; `None` for a file.
    pub sums: Option<PathBuf>,
    /// The SHA-256 of each of [`HostSource::files`], lowercase hex: a copy of a host file is
    /// the same host process under another name.
    pub digests: Vec<String>,
    /// The tests its processes ran.
    pub tests: Vec<TestKey>,
    /// The model its first process measured, as llama-bench described it.
    pub model: Option<ModelId>,
    /// What the reader must know about it: a host bundle whose machine record says it ran in
    /// a virtual machine.
    pub warnings: Vec<String>,
}

/// A warning when the bundle `dir`'s machine record (`environment.json`) says it ran in a
/// virtual machine: Apple names its guests' hardware `VirtualMac` and their chip `(Virtual)`.
fn made_in_a_guest(dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(dir.join("environment.json")).ok()?;
    let env: serde_json::Value = serde_json::from_str(&text).ok()?;
    let machine = &env["machine"];
    let hw_model = machine["hw_model"].as_str().unwrap_or_default();
    let chip = machine["cpu_brand"].as_str().unwrap_or_default();
    (hw_model.starts_with("VirtualMac") || chip.contains("(Virtual)")).then(|| {
        format!(
            "--baseline {}: its machine record says it ran in a virtual machine (hw.model {hw_model:?}, \
             CPU {chip:?}), not on the bare-metal host; percent of host is then of that guest",
            dir.display()
        )
    })
}

/// Reads one `--baseline`: a llama-bench JSON file, or a host bench bundle (checked).
///
/// # Errors
/// [`BaselineError`] naming the file or bundle and the fix.
pub fn read_source(given: &Path) -> Result<HostSource, BaselineError> {
    if !given.is_dir() {
        let rows = read_bench_file(given).map_err(|e| BaselineError::File {
            path: given.to_path_buf(),
            why: crate::format::chain(&e),
        })?;
        let digest = sha256_file(given).map_err(|e| BaselineError::File {
            path: given.to_path_buf(),
            why: e.to_string(),
        })?;
        return Ok(HostSource {
            given: given.to_path_buf(),
            files: vec![given.to_path_buf()],
            digests: vec![digest],
            sums: None,
            tests: rows.iter().map(|r| r.key).collect(),
            model: rows.first().map(|r| r.model.clone()),
            warnings: Vec::new(),
        });
    }
    let bad = |why: String| BaselineError::Bundle {
        dir: given.to_path_buf(),
        why,
    };
    let checked = |e: BundleError| bad(crate::format::chain(&e));
    let not_host = |why: &str| BaselineError::NotHost {
        dir: given.to_path_buf(),
        why: why.to_string(),
    };
    // A directory with none of a bundle's files is no unfinished bundle: say what it is.
    let marks = [
        "environment.json",
        bundle::SUMS_FILE,
        bundle::INCOMPLETE_FILE,
    ];
    if !marks.iter().any(|f| given.join(f).exists()) {
        return Err(not_host(
            "it is not an evidence bundle (no environment.json, SHA256SUMS or INCOMPLETE in it)",
        ));
    }
    bundle::verify(given).map_err(checked)?;
    let header = schema::read_header(given).map_err(checked)?;
    if header.kind != Kind::Bench {
        // Whether it passes its own check is beside the point: it is no host.
        return Err(not_host(&format!(
            "it is a {} bundle, not a bench bundle",
            header.kind.name()
        )));
    }
    schema::require_derivable(given, &header).map_err(checked)?;
    let schema = header.schema_version.expect("a derivable layout");
    let (manifest, _) = super::check::check(given, schema).map_err(checked)?;
    if manifest.workload.is_some() {
        return Err(not_host(
            "it is a `capshim bench --command` bundle: it has no llama-bench results",
        ));
    }
    let stock = manifest.arms.iter().find(|a| a.role == "stock");
    let mut runs: Vec<_> = stock
        .map(|a| a.runs.iter().filter(|r| r.failed.is_none()).collect())
        .unwrap_or_default();
    runs.sort_by_key(|r| r.round);
    if runs.is_empty() {
        return Err(bad(
            "it has no stock arm with a result: its stock arm's processes are the host's".into(),
        ));
    }
    let mut files = Vec::new();
    let mut digests = Vec::new();
    let mut tests = Vec::new();
    let mut model = None;
    for run in runs {
        let path = given.join(&run.json);
        let rows = read_bench_file(&path).map_err(|e| bad(crate::format::chain(&e)))?;
        tests.extend(rows.iter().map(|r| r.key));
        model = model.or_else(|| rows.first().map(|r| r.model.clone()));
        digests.push(sha256_file(&path).map_err(|e| bad(format!("{}: {e}", path.display())))?);
        files.push(path);
    }
    Ok(HostSource {
        given: given.to_path_buf(),
        files,
        digests,
        sums: Some(given.join(bundle::SUMS_FILE)),
        tests,
        model,
        warnings: made_in_a_guest(given).into_iter().collect(),
    })
}

/// Adds `source` to `sources` unless one of its host processes is there already: the same
/// file, or a copy of it (the same SHA-256, whatever its path or bundle). Pooling a process
/// twice would count its samples twice and make one host process look like two.
///
/// # Errors
/// The refusal, naming both paths: a usage error for the caller (exit 2).
pub fn add_once(sources: &mut Vec<HostSource>, source: HostSource) -> Result<(), String> {
    let real = |f: &PathBuf| std::fs::canonicalize(f).unwrap_or_else(|_| f.clone());
    let theirs: Vec<PathBuf> = source.files.iter().map(real).collect();
    if sources
        .iter()
        .any(|s| s.files.iter().any(|f| theirs.contains(&real(f))))
    {
        return Err(format!(
            "--baseline {} is given twice: each host process counts once; give each file or \
             bundle once",
            source.given.display()
        ));
    }
    // Across sources only: a checked bundle's processes are its own distinct runs.
    let known: Vec<(&PathBuf, &String)> = sources
        .iter()
        .flat_map(|s| s.files.iter().zip(&s.digests))
        .collect();
    for (file, digest) in source.files.iter().zip(&source.digests) {
        if let Some((first, _)) = known.iter().find(|(_, d)| *d == digest) {
            return Err(format!(
                "--baseline {}: {} holds the same results as {} (a copy of it, the same \
                 SHA-256): each host process counts once, and pooling it twice would count its \
                 samples twice; give each host file or bundle once",
                source.given.display(),
                file.display(),
                first.display()
            ));
        }
    }
    sources.push(source);
    Ok(())
}

/// Checks, before the first run, that each host of `sources` measured the bench's `model`: a
/// host bundle by the model's SHA-256 in its `environment.json` (the file is hashed only when
/// its size is the recorded one), a llama-bench file by its `model_n_params` against the
/// parameter count in the model's GGUF tensor table (skipped when that cannot be read).
///
/// # Errors
/// [`BaselineError::Model`] naming both models.
pub fn check_model(sources: &[HostSource], model: &Path) -> Result<(), BaselineError> {
    let size = std::fs::metadata(model).map(|m| m.len()).ok();
    let mut digest: Option<Option<String>> = None;
    let mut params: Option<Option<u64>> = None;
    for source in sources {
        let host = source
            .model
            .as_ref()
            .map(ModelId::to_string)
            .unwrap_or_default();
        let refuse = |bench: String| BaselineError::Model {
            given: source.given.clone(),
            host: host.clone(),
            model: model.to_path_buf(),
            bench,
        };
        if source.sums.is_some() {
            let Some(recorded) = recorded_model(&source.given) else {
                continue;
            };
            if size.is_some_and(|s| s != recorded.1) {
                return Err(refuse(format!(
                    "{} bytes, the host's {} bytes",
                    size.unwrap_or_default(),
                    recorded.1
                )));
            }
            let ours = digest.get_or_insert_with(|| sha256_file(model).ok());
            if let Some(ours) = ours.as_ref().filter(|d| **d != recorded.0) {
                return Err(refuse(format!("SHA-256 {ours}, the host's {}", recorded.0)));
            }
        } else {
            let ours = *params.get_or_insert_with(|| gguf::n_params(model));
            let theirs = source.model.as_ref().and_then(|m| m.n_params);
            if let (Some(ours), Some(theirs)) = (ours, theirs)
                && ours != theirs
            {
                return Err(refuse(format!(
                    "of {ours} parameters (its GGUF tensors), the host's {theirs}"
                )));
            }
        }
    }
    Ok(())
}

/// The model's SHA-256 and size a bench bundle's `environment.json` records (`files.model`).
fn recorded_model(dir: &Path) -> Option<(String, u64)> {
    let text = std::fs::read_to_string(dir.join("environment.json")).ok()?;
    let env: serde_json::Value = serde_json::from_str(&text).ok()?;
    let model = &env["files"]["model"];
    Some((
        model["sha256"].as_str()?.to_string(),
        model["bytes"].as_u64()?,
    ))
}

/// Checks that every host process of `sources` measured one model with one set of settings
/// per test (as the host arm's analysis will require), before the first run.
///
/// # Errors
/// [`BaselineError::Mixed`] naming the files that differ.
pub fn check_one_host(sources: &[HostSource]) -> Result<(), BaselineError> {
    if sources.is_empty() {
        return Ok(());
    }
    let mut runs = Vec::new();
    for (i, path) in sources.iter().flat_map(|s| &s.files).enumerate() {
        let rows = read_bench_file(path).map_err(|e| BaselineError::File {
            path: path.clone(),
            why: crate::format::chain(&e),
        })?;
        runs.push(RunInput {
            round: i as u32 + 1,
            path: path.clone(),
            rows,
        });
    }
    let arm = ArmInput {
        name: "host".into(),
        role: Role::Host,
        group: None,
        reference_for_all: false,
        runs,
        args: Vec::new(),
        metal: Vec::new(),
        activation: None,
        randomized: false,
    };
    analyze(&[arm])
        .map(|_| ())
        .map_err(|e| BaselineError::Mixed(e.to_string()))
}
