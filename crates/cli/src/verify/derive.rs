//! From a verify bundle's raw files and manifest to its [`Summary`]: each step's output read
//! back ([`read_step`], which the run itself uses to decide as it goes), the shim's
//! activation, the comparisons with the reference and each arm's verdict. The same function
//! serves the run (sealing) and `capshim report` (checking), so a bundle re-derives exactly.

use std::path::{Path, PathBuf};

use super::base::{GreedyText, Sidecar};
use super::manifest::{Manifest, ManifestArm, Step, StepFiles};
use super::summary::{ArmSummary, Divergence, KernelSummary, ScoredSummary, Summary, Verdict};
use super::thresholds::{Measured, judge};
use crate::launch::status::{StatusEvent, StatusFileError};
use crate::llama::Activation;
use crate::llama::backend_ops::{self, BackendOps, KernelTests};
use crate::llama::perplexity::{self, BaseRun, ComparedRun, Scored};

/// A raw file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum DeriveError {
    /// It cannot be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A tool's output gives no result.
    #[error("{tool}'s output in arm {arm} ({file}) gives no result: {why}")]
    Output {
        /// The tool.
        tool: &'static str,
        /// The arm.
        arm: String,
        /// Its stdout file.
        file: PathBuf,
        /// Why.
        why: String,
    },
    /// A status file is not the shim's.
    #[error(transparent)]
    Status(#[from] StatusFileError),
    /// The base's description in the bundle is unreadable.
    #[error("{path} is not a capshim base description: {why}")]
    Sidecar {
        /// The file.
        path: PathBuf,
        /// Why.
        why: String,
    },
}

/// What one step printed, read.
#[derive(Clone, Debug)]
pub enum Output {
    /// The reference's llama-perplexity run that saved the base.
    Base(BaseRun),
    /// A llama-perplexity run compared with the base.
    Compared(Box<ComparedRun>),
    /// llama-completion's text.
    Greedy(String),
    /// test-backend-ops' result.
    Kernels(BackendOps),
}

/// One step read back.
#[derive(Clone, Debug)]
pub struct StepResult {
    /// Its output.
    pub output: Output,
    /// Whether the shim activated, for arms with the shim.
    pub activation: Option<Activation>,
}

impl StepResult {
    /// Why the arm must not be compared after this step, when its shim was expected to hook a
    /// device and did not (test-backend-ops on a build without the device creates none).
    pub fn inactive(&self, step: Step) -> Option<String> {
        let activation = self.activation.as_ref()?;
        let no_device = matches!(self.output, Output::Kernels(BackendOps::NoDevice { .. }));
        (!activation.activated && !no_device).then(|| {
            format!(
                "the shim did not activate in {}: {}",
                step.tool(),
                activation.describe()
            )
        })
    }
}

fn read(path: &Path) -> Result<String, DeriveError> {
    std::fs::read(path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .map_err(|source| DeriveError::Read {
            path: path.to_path_buf(),
            source,
        })
}

/// Reads one step of `arm` from the bundle `dir`.
///
/// # Errors
/// [`DeriveError`] when a file is unreadable or the tool's output gives no result.
pub fn read_step(
    dir: &Path,
    manifest: &Manifest,
    arm: &ManifestArm,
    files: &StepFiles,
) -> Result<StepResult, DeriveError> {
    let stdout = read(&dir.join(&files.stdout))?;
    let stderr = read(&dir.join(&files.stderr))?;
    let failed = |why: String| DeriveError::Output {
        tool: files.step.tool(),
        arm: arm.name.clone(),
        file: dir.join(&files.stdout),
        why,
    };
    let saves_base = arm.name == manifest.reference;
    let output = match files.step {
        Step::Perplexity if saves_base => Output::Base(
            perplexity::parse_base(&stdout, &stderr).map_err(|e| failed(e.to_string()))?,
        ),
        Step::Perplexity => Output::Compared(Box::new(
            perplexity::parse_compared(&stdout, &stderr).map_err(|e| failed(e.to_string()))?,
        )),
        Step::Greedy => Output::Greedy(stdout),
        Step::Kernels => {
            let device = manifest
                .kernels
                .as_ref()
                .map_or("MTL0", |k| k.device.as_str());
            Output::Kernels(backend_ops::parse(&stdout, device).map_err(|e| failed(e.to_string()))?)
        }
    };
    let activation = match (&files.status, arm.shim) {
        (Some(rel), true) => {
            let events = StatusEvent::read_file(&dir.join(rel))?;
            Some(Activation::from_evidence(true, &events, &stderr))
        }
        _ => None,
    };
    Ok(StepResult { output, activation })
}

/// The index of the first character where `a` and `b` differ (or where the shorter ends);
/// `None` when they are equal.
pub fn first_difference(a: &str, b: &str) -> Option<usize> {
    let mut chars = a.chars().zip(b.chars());
    match chars.position(|(x, y)| x != y) {
        Some(i) => Some(i),
        None => (a.chars().count() != b.chars().count())
            .then(|| a.chars().count().min(b.chars().count())),
    }
}

/// The reference's greedy text and kernel tests, from its arm or the base's description.
struct Reference {
    greedy: Result<String, String>,
    kernels: Option<KernelTests>,
    ppl: Option<f64>,
    scored: Option<Scored>,
}

fn reference(dir: &Path, manifest: &Manifest) -> Result<Reference, DeriveError> {
    if let Some(arm) = manifest.arms.iter().find(|a| a.name == manifest.reference) {
        let mut r = Reference {
            greedy: Err("the reference's llama-completion did not run".into()),
            kernels: None,
            ppl: None,
            scored: None,
        };
        for files in arm.steps.iter().filter(|f| f.failed.is_none()) {
            match read_step(dir, manifest, arm, files)?.output {
                Output::Base(run) => {
                    r.ppl = Some(run.ppl.value);
                    r.scored = Some(run.scored);
                }
                Output::Greedy(text) => r.greedy = Ok(text),
                Output::Kernels(BackendOps::Tested(t)) => r.kernels = Some(t),
                _ => {}
            }
        }
        return Ok(r);
    }
    // A saved base: its description, copied into the bundle, holds its greedy text.
    let sidecar = match manifest.base.as_ref().and_then(|b| b.sidecar.as_ref()) {
        Some(rel) => {
            let path = dir.join(rel);
            let parsed: Sidecar =
                serde_json::from_str(&read(&path)?).map_err(|e| DeriveError::Sidecar {
                    path,
                    why: e.to_string(),
                })?;
            Some(parsed)
        }
        None => None,
    };
    let greedy = match sidecar.as_ref().map(|s| &s.greedy) {
        None => Err("the base has no description beside it".to_string()),
        Some(None) => Err("the base's description holds no greedy text".to_string()),
        Some(Some(GreedyText {
            prompt,
            n_predict,
            seed,
            text,
        })) => {
            let g = &manifest.greedy;
            if (prompt, *n_predict, *seed) == (&g.prompt, g.n_predict, g.seed) {
                Ok(text.clone())
            } else {
                Err("the base's greedy text was made with another prompt, -n or seed".to_string())
            }
        }
    };
    Ok(Reference {
        greedy,
        kernels: sidecar.and_then(|s| s.kernel_tests),
        ppl: None,
        scored: None,
    })
}

fn kernel_summary(tests: &KernelTests, reference: Option<&KernelTests>) -> KernelSummary {
    let new_failures = tests
        .failing
        .iter()
        .filter(|f| !reference.is_some_and(|r| r.failing.contains(f)))
        .cloned()
        .collect();
    KernelSummary {
        passed: tests.passed,
        failed: tests.failed,
        unsupported: tests.unsupported,
        device: tests.device.clone(),
        description: tests.description.clone(),
        failing: tests.failing.clone(),
        new_failures,
    }
}

/// Derives the summary of the bundle `dir`, of layout `schema` (1 or 6, the verify layouts
/// this capshim derives: 6 adds steps `--keep-going` recorded as failed, which layout 1
/// bundles never hold, so one derivation serves both), from its manifest and raw files.
///
/// # Errors
/// [`DeriveError`] naming the raw file that cannot be used.
pub fn derive(dir: &Path, manifest: &Manifest, schema: u32) -> Result<Summary, DeriveError> {
    let reference = reference(dir, manifest)?;
    let mut scored = reference.scored;
    let mut reference_ppl = reference.ppl;
    let mut warnings: Vec<String> = manifest
        .base
        .iter()
        .flat_map(|b| b.warnings.iter().cloned())
        .collect();
    let mut arms = Vec::new();
    let mut reference_failed = false;
    for arm in &manifest.arms {
        let mut s = ArmSummary {
            name: arm.name.clone(),
            verdict: Verdict::Equivalent,
            evidence: Vec::new(),
            profile: arm.profile.clone(),
            shim: arm.shim,
            env: arm.env.clone(),
            args: arm.args.clone(),
            activation: None,
            kld_mean: None,
            kld_mean_uncertainty: None,
            kld_p99: None,
            kld_max: None,
            top1_agreement: None,
            top1_agreement_uncertainty: None,
            ppl: None,
            ppl_delta: None,
            greedy_first_divergence: None,
            greedy: "not compared: llama-completion did not run".into(),
            kernel_tests: None,
            kernel_tests_note: Some(match &manifest.kernels {
                None => "not run: --no-kernel-tests".to_string(),
                Some(_) => "not run".to_string(),
            }),
        };
        let is_reference = arm.name == manifest.reference;
        let mut measured = Measured::default();
        let mut compared = false;
        let mut not_run = None;
        let mut activations = Vec::new();
        let mut failed = Vec::new();
        for files in &arm.steps {
            if let Some(reason) = &files.failed {
                failed.push(format!("its {} failed ({reason})", files.step.tool()));
                continue;
            }
            let step = read_step(dir, manifest, arm, files)?;
            if let Some(a) = &step.activation {
                activations.push(a.clone());
            }
            if let Some(why) = step.inactive(files.step) {
                if !manifest.allow_inactive {
                    not_run = Some(why);
                    break;
                }
            }
            match step.output {
                Output::Base(run) => s.ppl = Some(run.ppl.value),
                Output::Compared(run) => {
                    compared = true;
                    scored.get_or_insert(run.scored);
                    reference_ppl.get_or_insert(run.ppl_base.value);
                    let delta = (run.ppl.value - run.ppl_base.value) / run.ppl_base.value;
                    (s.kld_mean, s.kld_mean_uncertainty) =
                        (Some(run.kld_mean.value), run.kld_mean.uncertainty);
                    (s.kld_p99, s.kld_max) = (Some(run.kld_p99), run.kld_max);
                    (s.top1_agreement, s.top1_agreement_uncertainty) = (
                        Some(run.top1_agreement.value),
                        run.top1_agreement.uncertainty,
                    );
                    (s.ppl, s.ppl_delta) = (Some(run.ppl.value), Some(delta));
                    measured.kld_mean = run.kld_mean.value;
                    measured.kld_p99 = run.kld_p99;
                    measured.top1 = run.top1_agreement.value;
                    measured.ppl_delta = delta;
                }
                Output::Greedy(text) => {
                    s.greedy = if is_reference {
                        "reference".to_string()
                    } else {
                        match &reference.greedy {
                            Err(why) => format!("not compared: {why}"),
                            Ok(reference) => match first_difference(reference, &text) {
                                None => "identical".to_string(),
                                Some(index) => {
                                    s.greedy_first_divergence = Some(Divergence {
                                        unit: "char",
                                        index,
                                    });
                                    measured.greedy_divergence = Some(index);
                                    "differs".to_string()
                                }
                            },
                        }
                    };
                }
                Output::Kernels(BackendOps::Tested(tests)) => {
                    let k = kernel_summary(&tests, reference.kernels.as_ref());
                    if !is_reference {
                        measured.new_kernel_failures = k.new_failures.clone();
                    }
                    s.kernel_tests = Some(k);
                    s.kernel_tests_note = None;
                }
                Output::Kernels(BackendOps::NoDevice { device, devices }) => {
                    s.kernel_tests_note = Some(format!(
                        "not run: this llama.cpp build has no {device} device (test-backend-ops lists {}), \
                         so no Metal kernel was tested",
                        devices.join(", ")
                    ));
                }
            }
        }
        if arm.shim {
            s.activation = Activation::combine(&activations).map(|a| a.describe());
            if let (true, Some(a)) = (manifest.allow_inactive, Activation::combine(&activations))
                && !a.activated
            {
                warnings.push(format!(
                    "arm {}: {}; compared anyway (--allow-inactive): its figures are a stock guest's",
                    arm.name,
                    a.describe()
                ));
            }
        }
        if is_reference {
            s.verdict = Verdict::Reference;
            if !failed.is_empty() {
                reference_failed = true;
                warnings.push(format!(
                    "the reference arm {} failed ({}): nothing was compared with it",
                    arm.name,
                    failed.join("; ")
                ));
                s.evidence = failed;
            }
        } else if !failed.is_empty() {
            s.verdict = Verdict::NotRun;
            s.evidence = failed;
        } else if let Some(why) = not_run {
            s.verdict = Verdict::NotRun;
            s.evidence = vec![why];
            s.greedy = "not run".into();
            s.kernel_tests_note = None;
        } else if !compared {
            s.verdict = Verdict::NotRun;
            s.evidence = vec!["its llama-perplexity comparison did not run".into()];
        } else {
            s.evidence = judge(&measured, &manifest.thresholds);
            if !s.evidence.is_empty() {
                s.verdict = Verdict::Different;
            }
        }
        arms.push(s);
    }
    if let Some(sc) = scored
        && sc.tokens() < 500
    {
        warnings.push(format!(
            "only {} tokens were scored: one token moves top-1 agreement by {:.2}%; use a longer \
             --text or more --chunks",
            sc.tokens(),
            100.0 / sc.tokens().max(1) as f64
        ));
    }
    let (_, kind) = Summary::header();
    Ok(Summary {
        schema_version: schema,
        kind,
        result: if reference_failed {
            "incomplete"
        } else {
            Summary::result_of(&arms)
        },
        reference: manifest.reference.clone(),
        reference_ppl,
        model: manifest.model.clone(),
        text: manifest.text.clone(),
        scored: scored.map(|sc| ScoredSummary {
            chunks: sc.chunks,
            ctx: sc.ctx,
            tokens: sc.tokens(),
        }),
        thresholds: manifest.thresholds,
        extra_args: if schema >= 6 {
            manifest.extra_args.clone()
        } else {
            Vec::new()
        },
        base: manifest.base.clone(),
        arms,
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_texts_differ_at_the_first_character_that_does() {
        assert_eq!(first_difference("abc", "abc"), None);
        assert_eq!(first_difference("abc", "abd"), Some(2));
        assert_eq!(first_difference("abc", "ab"), Some(2));
        assert_eq!(first_difference("", "x"), Some(0));
        assert_eq!(
            first_difference("héllo", "héllø"),
            Some(4),
            "characters, not bytes"
        );
    }
}
