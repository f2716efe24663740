//! `summary.json` of a verify bundle: the verdict and metrics of every arm.
//!
//! Keys may be added in later versions, none renamed (`schema_version` says which layout).

use serde::Serialize;

use super::manifest::{BaseRecord, KIND, SCHEMA_VERSION};
use super::thresholds::Thresholds;
use crate::launch::environment::pairs_as_object;

/// An arm's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Verdict {
    /// Every metric within its threshold.
    #[serde(rename = "equivalent")]
    Equivalent,
    /// At least one metric crossed its threshold (the evidence names each).
    #[serde(rename = "different")]
    Different,
    /// Not compared: its shim did not activate (without `--allow-inactive`).
    #[serde(rename = "not run")]
    NotRun,
    /// The arm every other is compared with.
    #[serde(rename = "reference")]
    Reference,
}

impl Verdict {
    /// The verdict as written in `summary.json` and the report.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Equivalent => "equivalent",
            Verdict::Different => "different",
            Verdict::NotRun => "not run",
            Verdict::Reference => "reference",
        }
    }
}

/// Where an arm's greedy text first differs from the reference's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Divergence {
    /// `char`: the index counts Unicode characters of llama-completion's output
    /// (llama-completion prints text, not token ids).
    pub unit: &'static str,
    /// 0-based index of the first character that differs (or where the shorter text ends).
    pub index: usize,
}

/// test-backend-ops' counts for one arm.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KernelSummary {
    /// Test cases that matched the CPU.
    pub passed: u64,
    /// Test cases that did not.
    pub failed: u64,
    /// Test cases the device does not support.
    pub unsupported: u64,
    /// The device tested.
    pub device: String,
    /// Its description.
    pub description: Option<String>,
    /// Every failed case.
    pub failing: Vec<String>,
    /// The failed cases the reference passed (or, against a base, every failed case the base's
    /// own run did not fail).
    pub new_failures: Vec<String>,
}

/// One arm's line of the summary.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ArmSummary {
    /// The arm's label (the key it is stored under).
    #[serde(skip)]
    pub name: String,
    /// Its verdict.
    pub verdict: Verdict,
    /// Why: each threshold crossed, or why it was not run.
    pub evidence: Vec<String>,
    /// The profile it ran with.
    pub profile: String,
    /// Whether the shim was injected.
    pub shim: bool,
    /// Its own environment variables.
    #[serde(serialize_with = "pairs_as_object")]
    pub env: Vec<(String, String)>,
    /// Its own llama-perplexity and llama-completion arguments (`common-args`), when it has any.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Whether the shim activated, in words (arms with the shim).
    pub activation: Option<String>,
    /// Mean KL divergence from the reference, nats per token.
    pub kld_mean: Option<f64>,
    /// llama-perplexity's standard error of it.
    pub kld_mean_uncertainty: Option<f64>,
    /// 99th-percentile KL divergence, nats.
    pub kld_p99: Option<f64>,
    /// Largest KL divergence of a token, nats.
    pub kld_max: Option<f64>,
    /// Fraction of tokens where the arm and the reference rank the same token first, 0–1.
    pub top1_agreement: Option<f64>,
    /// llama-perplexity's standard error of it.
    pub top1_agreement_uncertainty: Option<f64>,
    /// Perplexity of the text.
    pub ppl: Option<f64>,
    /// (arm − reference) / reference.
    pub ppl_delta: Option<f64>,
    /// Where the greedy text first differs; `null` when identical or not compared.
    pub greedy_first_divergence: Option<Divergence>,
    /// `identical`, `differs`, or `not compared: WHY`.
    pub greedy: String,
    /// test-backend-ops' counts; `null` when not run (see `kernel_tests_note`).
    pub kernel_tests: Option<KernelSummary>,
    /// Why the kernel tests did not run, when they did not.
    pub kernel_tests_note: Option<String>,
}

/// Scored text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ScoredSummary {
    /// Chunks.
    pub chunks: u64,
    /// Tokens per chunk.
    pub ctx: u64,
    /// Tokens whose predictions were compared.
    pub tokens: u64,
}

/// The whole of `summary.json`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    /// Layout version.
    pub schema_version: u32,
    /// `verify`.
    pub kind: &'static str,
    /// `equivalent` (every compared arm), `different` (at least one), `incomplete` (an arm was
    /// not run) or `reference only` (no arm to compare).
    pub result: &'static str,
    /// The reference: an arm's label, or `base`.
    pub reference: String,
    /// The reference's perplexity of the text.
    pub reference_ppl: Option<f64>,
    /// The model's file name.
    pub model: String,
    /// The text: `built-in` or its file name.
    pub text: String,
    /// How much of it was scored.
    pub scored: Option<ScoredSummary>,
    /// The limits of `equivalent`.
    pub thresholds: Thresholds,
    /// Layout 6: the arguments given after `--`, which every arm's llama-perplexity and
    /// llama-completion ran with (`-ngl 0` moves the whole model to the CPU, so they belong
    /// beside the verdicts); absent when none, and in layout 1, which did not show them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub extra_args: Vec<String>,
    /// The base used or written.
    pub base: Option<BaseRecord>,
    /// Every arm, the reference first (a JSON object keyed by label, in that order).
    #[serde(serialize_with = "arms_as_object")]
    pub arms: Vec<ArmSummary>,
    /// What weakens the comparison.
    pub warnings: Vec<String>,
}

impl Summary {
    /// A new summary's fixed fields.
    pub fn result_of(arms: &[ArmSummary]) -> &'static str {
        let verdicts = || arms.iter().map(|a| a.verdict);
        if verdicts().any(|v| v == Verdict::Different) {
            "different"
        } else if verdicts().any(|v| v == Verdict::NotRun) {
            "incomplete"
        } else if verdicts().all(|v| v == Verdict::Reference) {
            "reference only"
        } else {
            "equivalent"
        }
    }

    /// The layout version and kind, for [`Summary`]'s constructor.
    pub const fn header() -> (u32, &'static str) {
        (SCHEMA_VERSION, KIND)
    }
}

fn arms_as_object<S: serde::Serializer>(arms: &[ArmSummary], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut map = s.serialize_map(Some(arms.len()))?;
    for arm in arms {
        map.serialize_entry(&arm.name, arm)?;
    }
    map.end()
}
