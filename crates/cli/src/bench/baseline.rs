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
use crate::llama::{TestKey, read_bench_file};

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
    /// The host processes cannot be pooled as one arm (different models or settings).
    #[error(
        "--baseline: the host's processes cannot be one baseline: {0}; give host files of one \
         model and one set of llama-bench settings"
    )]
    Mixed(String),
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
            warnings: Vec::new(),
        });
    }
    let bad = |why: String| BaselineError::Bundle {
        dir: given.to_path_buf(),
        why,
    };
    let checked = |e: BundleError| bad(crate::format::chain(&e));
    bundle::verify(given).map_err(checked)?;
    let header = schema::read_header(given).map_err(checked)?;
    if header.kind != Kind::Bench {
        return Err(bad(format!(
            "it is a {} bundle, not a bench bundle",
            header.kind.name()
        )));
    }
    schema::require_derivable(given, &header).map_err(checked)?;
    let schema = header.schema_version.expect("a derivable layout");
    let (manifest, _) = super::check::check(given, schema).map_err(checked)?;
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
    for run in runs {
        let path = given.join(&run.json);
        let rows = read_bench_file(&path).map_err(|e| bad(crate::format::chain(&e)))?;
        tests.extend(rows.iter().map(|r| r.key));
        digests.push(sha256_file(&path).map_err(|e| bad(format!("{}: {e}", path.display())))?);
        files.push(path);
    }
    Ok(HostSource {
        given: given.to_path_buf(),
        files,
        digests,
        sums: Some(given.join(bundle::SUMS_FILE)),
        tests,
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
