//! Before and after the runs: the files identified (the model hashed before the first run,
//! the base checked against its description), the base's description written after the
//! reference ran (`--save-base`), and the seal: `summary.json` and `report.md` derived from the
//! raw files, `environment.json`, `SHA256SUMS`.

use std::io::Write as _;
use std::path::Path;

use sha2::{Digest, Sha256};

use super::base::{self, GreedyText, SIDECAR_FORMAT, Sidecar, sidecar_path};
use super::derive::{self, Output, read_step};
use super::manifest::{BaseRecord, Manifest};
use super::manifest::{KIND, SCHEMA_VERSION};
use super::plan::{BUILTIN_TEXT, Plan, Reference, Text};
use super::record::{Environment, Files, StepRecord};
use super::render;
use super::summary::Summary;
use crate::bundle::identity::{FileId, Stamp, file_id, identify};
use crate::bundle::{self, RAW_DIR, time};
use crate::experiment::machine;
use crate::experiment::record::Header;
use crate::experiment::seal::{Sealed, SealedBundle};
use crate::experiment::{ExperimentError, io};
use crate::launch::Os;
use crate::llama::backend_ops::BackendOps;

/// The result of a verify run.
pub struct Outcome {
    /// The bundle and its reports.
    pub bundle: SealedBundle,
    /// The summary.
    pub summary: Summary,
    /// Whether the reference arm failed (`--keep-going`): nothing was compared.
    pub reference_failed: bool,
}

impl Sealed for Outcome {
    fn bundle(&self) -> &SealedBundle {
        &self.bundle
    }
}

/// The files of a run, identified before it starts.
pub struct Prepared {
    /// The model.
    pub model: FileId,
    /// The text.
    pub text: FileId,
    /// The base read with `--base`.
    pub base: Option<FileId>,
    /// What weakens a comparison with that base.
    pub base_warnings: Vec<String>,
    /// The identities of the model, the text and the base when hashed, checked again after
    /// the last step ([`Stamp::check`]): the bundle records their SHA-256 only if every step
    /// used the files hashed.
    pub stamps: Vec<Stamp>,
}

fn file_name(path: &str) -> String {
    Path::new(path)
        .file_name()
        .map_or_else(|| path.to_string(), |n| n.to_string_lossy().into_owned())
}

impl Prepared {
    /// Hashes the model (and the base), with progress on stderr and stopped between blocks
    /// when `stop` returns a signal, and compares the base's description with this run.
    ///
    /// # Errors
    /// When a file cannot be read, or a signal stopped the hashing.
    pub fn new(plan: &Plan, stop: &dyn Fn() -> Option<i32>) -> Result<Prepared, ExperimentError> {
        let (model, model_stamp) = identify(&plan.model, "model", stop)?;
        let mut stamps = vec![model_stamp];
        let text = match &plan.text {
            Text::File(path) => {
                let (id, stamp) = identify(path, "text", stop)?;
                stamps.push(stamp);
                id
            }
            Text::Builtin => FileId {
                path: "built-in".to_string(),
                bytes: BUILTIN_TEXT.len() as u64,
                sha256: Sha256::digest(BUILTIN_TEXT.as_bytes())
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect(),
                modified_utc: None,
            },
        };
        let mut prepared = Prepared {
            model,
            text,
            base: None,
            base_warnings: Vec::new(),
            stamps,
        };
        if let Reference::Base { path, sidecar, .. } = &plan.reference {
            let (id, stamp) = identify(path, "base", stop)?;
            prepared.stamps.push(stamp);
            let warnings = &mut prepared.base_warnings;
            match sidecar {
                None => warnings.push(format!(
                    "no {} beside the base: the model it was made from cannot be checked, and there \
                     is no reference greedy text or kernel test result",
                    file_name(&sidecar_path(path).display().to_string())
                )),
                Some((_, s)) => {
                    if s.model.sha256 != prepared.model.sha256 {
                        warnings.push(format!(
                            "the base was made from another model file, {} (sha256 {}), not {} (sha256 \
                             {}): the comparison includes the difference between the two models",
                            file_name(&s.model.path),
                            s.model.sha256,
                            file_name(&prepared.model.path),
                            prepared.model.sha256
                        ));
                    }
                    if s.base.sha256 != id.sha256 {
                        warnings.push(
                            "the base's SHA-256 is not the one recorded when it was saved: it was \
                             changed or replaced since"
                                .to_string(),
                        );
                    }
                }
            }
            prepared.base = Some(id);
            for warning in &prepared.base_warnings {
                crate::term::warning(warning);
            }
        }
        Ok(prepared)
    }

    /// The manifest before any arm ran; with `--base`, the base's description is copied into
    /// the bundle `dir`.
    ///
    /// # Errors
    /// When the description cannot be copied.
    pub fn manifest(&self, plan: &Plan, dir: &Path) -> Result<Manifest, ExperimentError> {
        let base = match (&plan.reference, &self.base) {
            (Reference::Base { path, sidecar, .. }, Some(id)) => {
                let copied = match sidecar {
                    Some((from, _)) => {
                        let rel = format!("{RAW_DIR}/base.capshim.json");
                        std::fs::copy(from, dir.join(&rel))
                            .map_err(io("cannot copy into the bundle", from))?;
                        Some(rel)
                    }
                    None => None,
                };
                Some(BaseRecord {
                    path: path.display().to_string(),
                    bytes: id.bytes,
                    sha256: id.sha256.clone(),
                    saved: false,
                    sidecar: copied,
                    warnings: self.base_warnings.clone(),
                })
            }
            _ => None,
        };
        let ctx = match &plan.reference {
            Reference::Base { header, .. } => u64::from(header.ctx),
            Reference::Arm(_) => plan.ctx,
        };
        Ok(Manifest {
            model: file_name(&self.model.path),
            model_bytes: self.model.bytes,
            reference: plan.reference_name(),
            thresholds: plan.thresholds,
            allow_inactive: plan.allow_inactive,
            ctx,
            chunks: matches!(plan.reference, Reference::Arm(_)).then_some(plan.chunks),
            text: match &plan.text {
                Text::Builtin => "built-in".to_string(),
                Text::File(p) => file_name(&p.display().to_string()),
            },
            greedy: plan.greedy.clone(),
            kernels: plan.kernels.clone(),
            extra_args: plan.extra.clone(),
            base,
            arms: Vec::new(),
        })
    }
}

/// Writes the description beside the base the reference just saved at `path`, from the
/// reference's raw files, and returns the base's record.
///
/// # Errors
/// When the base is not complete, or the description cannot be written (it is never
/// overwritten).
pub fn write_sidecar(
    plan: &Plan,
    prepared: &Prepared,
    dir: &Path,
    manifest: &Manifest,
    path: &Path,
) -> Result<BaseRecord, ExperimentError> {
    let header = base::read_header(path).map_err(ExperimentError::derive)?;
    let base = file_id(path)?;
    let arm = manifest.arms.last().expect("the reference ran");
    let mut sidecar = Sidecar {
        format: SIDECAR_FORMAT.to_string(),
        schema_version: 1,
        capshim_version: env!("CARGO_PKG_VERSION").to_string(),
        created_utc: time::iso(time::now()),
        model: prepared.model.clone(),
        base: base.clone(),
        header,
        text: manifest.text.clone(),
        text_sha256: prepared.text.sha256.clone(),
        arm: arm.name.clone(),
        machine: serde_json::to_value(machine::collect()).unwrap_or_default(),
        greedy: None,
        kernel_tests: None,
    };
    for files in &arm.steps {
        match read_step(dir, manifest, arm, files)
            .map_err(ExperimentError::derive)?
            .output
        {
            Output::Greedy(text) => {
                let g = &plan.greedy;
                sidecar.greedy = Some(GreedyText {
                    prompt: g.prompt.clone(),
                    n_predict: g.n_predict,
                    seed: g.seed,
                    text,
                });
            }
            Output::Kernels(BackendOps::Tested(t)) => sidecar.kernel_tests = Some(t),
            _ => {}
        }
    }
    let json = serde_json::to_string_pretty(&sidecar).map_err(|source| ExperimentError::Json {
        what: "the base's description",
        source,
    })? + "\n";
    let to = sidecar_path(path);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&to)
        .map_err(io("cannot create (it is never overwritten)", &to))?;
    file.write_all(json.as_bytes())
        .map_err(io("cannot write", &to))?;
    crate::term::line(format!(
        "capshim: verify: saved the base {} ({} bytes) and its description {}",
        path.display(),
        base.bytes,
        to.display()
    ));
    Ok(BaseRecord {
        path: path.display().to_string(),
        bytes: base.bytes,
        sha256: base.sha256,
        saved: true,
        sidecar: None,
        warnings: Vec::new(),
    })
}

/// Derives `summary.json` and `report.md` from the raw files, writes them, `environment.json`
/// and `SHA256SUMS`.
///
/// # Errors
/// When a raw file gives no result or a file cannot be written.
pub fn seal(
    plan: &Plan,
    prepared: &Prepared,
    dir: &Path,
    started: u64,
    manifest: &Manifest,
    records: &[StepRecord],
) -> Result<Outcome, ExperimentError> {
    let summary = derive::derive(dir, manifest, SCHEMA_VERSION).map_err(ExperimentError::derive)?;
    let summary_json = pretty("summary.json", &summary)?;
    let markdown = render::markdown(&summary);
    let mut tools = vec![
        ("llama-perplexity", file_id(&plan.tools.perplexity)?),
        ("llama-completion", file_id(&plan.tools.completion)?),
    ];
    if let Some(path) = &plan.tools.backend_ops {
        tools.push(("test-backend-ops", file_id(path)?));
    }
    let env = Environment {
        header: Header::now(KIND, SCHEMA_VERSION, started),
        injection_variable: Os::current().injection_var(),
        files: Files {
            model: prepared.model.clone(),
            text: Some(prepared.text.clone()),
            dylib: plan.dylib.as_deref().map(file_id).transpose()?,
            tools,
        },
        arms: &plan.arms,
        steps: records,
        verify: manifest,
    };
    let env_json = pretty("environment.json", &env)?;
    for (name, text) in [
        ("summary.json", &summary_json),
        ("report.md", &markdown),
        ("environment.json", &env_json),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(io("cannot write", &path))?;
    }
    bundle::write_sums(dir)?;
    let reference_failed = manifest
        .arms
        .iter()
        .any(|a| a.name == manifest.reference && a.steps.iter().any(|f| f.failed.is_some()));
    Ok(Outcome {
        reference_failed,
        bundle: SealedBundle {
            dir: dir.to_path_buf(),
            markdown,
            summary_json,
        },
        summary,
    })
}

/// `value` as pretty JSON with a final newline.
fn pretty<T: serde::Serialize>(what: &'static str, value: &T) -> Result<String, ExperimentError> {
    serde_json::to_string_pretty(value)
        .map(|s| s + "\n")
        .map_err(|source| ExperimentError::Json { what, source })
}
