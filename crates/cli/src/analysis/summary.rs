//! What `analyze` returns: per test and arm, the statistics, speedups and percent of host;
//! per arm, its role, model, reported capabilities, activation and llama.cpp builds; and
//! the warnings. `summary.json` is this, serialized.

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};

use super::design::CarryOver;
use super::input::Role;
use super::interval::{Interval, Paired, Verdict};
use crate::llama::{Activation, MetalReport, ModelId};

/// Statistics of one arm on one test, in tokens/s (for a `bench --command` row, in the row's
/// `unit`; the speedup is then reference / arm where lower is better, so that above 1 always
/// means the arm is better).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ArmStats {
    /// Median of `samples_ts`, in tokens/s.
    pub median_ts: f64,
    /// Smallest sample, in tokens/s.
    pub min_ts: f64,
    /// Largest sample, in tokens/s.
    pub max_ts: f64,
    /// Number of samples.
    pub samples: usize,
    /// This arm's median / the stock arm's median; `null` for the stock arm itself or without one.
    pub speedup_vs_stock: Option<f64>,
    /// 100 × this arm's median / the host arm's median; `null` for the host arm itself or without one.
    pub percent_of_host: Option<f64>,
    /// The speedup's confidence interval ([`CONFIDENCE_LEVEL`](super::interval::CONFIDENCE_LEVEL),
    /// 95%) from the rounds both arms ran, paired (Wilcoxon signed-rank); `null` for
    /// the stock arm, without a stock arm, or with fewer than
    /// [`MIN_ROUNDS`](super::interval::MIN_ROUNDS) paired rounds (`speedup_no_interval` says why).
    pub speedup_ci95: Option<Interval>,
    /// What the interval shows against the noise band: `faster`, `slower`,
    /// `no_measurable_difference` or `inconclusive`; `null` without an interval.
    pub verdict: Option<Verdict>,
    /// How precise the interval is: its centre, half-width, rounds, exact coverage, the
    /// round-to-round spread and the rounds that would bring it within the noise band; `null`
    /// without an interval.
    pub speedup_precision: Option<Paired>,
    /// Why a speedup has no interval, and how many rounds it needs; `null` otherwise.
    pub speedup_no_interval: Option<String>,
    /// Schema 6: arm median / stock median, the ratio of the pooled medians (schema 5's
    /// `speedup_vs_stock`); `speedup_vs_stock` is then the paired rounds' estimate, the
    /// point the interval belongs to. Absent in schema 5.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio_of_medians: Option<f64>,
    /// Schema 6: the verdict's own interval, at the family-wise level ([`super::family`]),
    /// or the rounds that level needs. Absent in schema 5 and without a 95% interval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict_basis: Option<FamilyVerdict>,
    /// Schema 6: this arm's carry-over in this test, the change of the next process's speed
    /// after one of its processes against after stock's ([`super::design`]); absent in
    /// schema 5 and without the run order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub carryover: Option<CarryOver>,
    /// Schema 6: whether its processes and stock's differ in duration by more than
    /// [`DURATION_RATIO`](super::design::DURATION_RATIO)× while its rounds scatter widely, so
    /// that the interval's level is approximate; absent in schema 5 and without durations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unequal_durations: Option<bool>,
    /// Schema 6: each paired round's ratio arm / stock (round medians), in round order.
    /// Absent in schema 5 and without a stock arm.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub round_ratios: Option<Vec<RoundRatio>>,
    /// Against a stock arm of another bundle ([`super::across`]): the ratio's spread without
    /// pairing rounds, `[lowest arm round median / highest stock round median, highest /
    /// lowest]`. Absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub speedup_spread: Option<[f64; 2]>,
    /// Token generation with a host arm: milliseconds each token takes beyond the host,
    /// `1000/median − 1000/host median` ([`super::across::ms_per_token_over_host`]). Absent for
    /// other tests, without a host, and in bundles of schema 5 (which did not derive it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ms_per_token_over_host: Option<f64>,
    /// Coefficient of variation of the samples (standard deviation / mean).
    pub cv: Option<f64>,
    /// Per round (or per file): median and sample count.
    pub rounds: Vec<RoundStats>,
    /// Every sample, in tokens/s, in file order.
    pub samples_ts: Vec<f64>,
}

/// A comparison's family-wise verdict (schema 6, [`super::family`]).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct FamilyVerdict {
    /// The verdict, read from `interval`; `inconclusive` when the level is out of reach.
    pub verdict: Verdict,
    /// The signed-rank interval at the verdict level (its `level` field), `None` when the
    /// rounds cannot reach it.
    pub interval: Option<Interval>,
    /// The interval's exact level (at least the verdict level), `None` without one.
    pub coverage: Option<f64>,
    /// When the level is out of reach: the rounds that would reach it.
    pub rounds_needed: Option<usize>,
}

/// One paired round's ratio (schema 6).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct RoundRatio {
    /// 1-based round.
    pub round: u32,
    /// The arm's round median / stock's round median.
    pub ratio: f64,
}

/// One round's share of an arm's samples.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RoundStats {
    /// 1-based round.
    pub round: u32,
    /// Median of the round's samples, in tokens/s.
    pub median_ts: f64,
    /// Number of samples in the round.
    pub samples: usize,
}

/// An ordered name → value map that serializes as a JSON object in insertion order.
#[derive(Clone, Debug, PartialEq)]
pub struct Ordered<T>(pub Vec<(String, T)>);

impl<T> Ordered<T> {
    /// The value for `name`.
    pub fn get(&self, name: &str) -> Option<&T> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }
}

impl<T: Serialize> Serialize for Ordered<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

/// One test: every arm's statistics, `null` where an arm lacks the test.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// llama-bench's name, e.g. `pp512`; `wall` or `metric` for a `bench --command` workload.
    pub test: String,
    /// The unit of the figures (`median_ts`, `min_ts`, `max_ts`, `samples_ts`, rounds) when
    /// they are not tokens/s: `seconds` for `wall`, the metric's unit (`--unit`, else
    /// `value`) for `metric`. Absent for llama-bench's tests.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// What the figures are, and which way is better (not serialized: `test` says it).
    #[serde(skip)]
    pub quantity: crate::llama::bench_json::Quantity,
    /// Prompt tokens.
    pub n_prompt: u64,
    /// Generated tokens.
    pub n_gen: u64,
    /// Context depth, in tokens.
    pub n_depth: u64,
    /// Model label (file name without `.gguf`).
    pub model: String,
    /// Per arm, in display order.
    pub arms: Ordered<Option<ArmStats>>,
}

/// The statistical settings every interval and verdict of a summary was computed with.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Method {
    /// The confidence level of every interval (0.95).
    pub confidence_level: f64,
    /// The noise band's half-width, a fraction (0.02 = ±2%).
    pub noise_band: f64,
    /// The fewest paired rounds an interval needs.
    pub min_rounds: usize,
    /// The interval's method, in words.
    pub interval: &'static str,
    /// Schema 6: how the verdicts are read, family-wise. Absent in schema 5, whose verdicts
    /// are each read from their own 95% interval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdicts: Option<VerdictFamily>,
}

/// How a summary's verdicts are read (schema 6): each from its interval at `verdict_level`,
/// so that all of them hold together with probability `family_level`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct VerdictFamily {
    /// The probability that every verdict of the summary is right together, at least (0.95).
    pub family_level: f64,
    /// The intervals the verdicts are read from: every comparison with a 95% interval.
    pub intervals: usize,
    /// Each verdict's level: `1 − (1 − family_level) / intervals`.
    pub verdict_level: f64,
    /// The method, in words.
    pub method: &'static str,
}

/// The layout version of a bench bundle, in its `environment.json` and `summary.json`: 6 since
/// a run `--keep-going` recorded as failed is in the manifest (this round's additions go into
/// 6 too); 5 since the rounds needed for the noise band come from the rounds' spread and intervals on rounds
/// not run in bench's order are flagged; 4 since each round's arm order is random and the
/// interval is the signed-rank one (schema 3 bundles ran a fixed order with a t interval); 3
/// since the manifest of raw files is in `environment.json` and every derived file is derived from
/// the primary files alone (docs/bundles.md); 2 when speedup intervals became per round
/// (paired rounds, Student's t, in a fixed order); bundles without one were written with a bootstrap interval.
/// Bump it whenever any derived file would come out different from the same raw files, so
/// that `capshim report` refuses the layouts it does not derive again by name, instead of
/// calling them changed.
pub const SCHEMA_VERSION: u32 = 6;

/// Everything `report` prints and `bench` stores in `summary.json`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// How intervals and verdicts were computed.
    pub statistics: Method,
    /// One entry per test, in the order llama-bench ran them.
    pub rows: Vec<Row>,
    /// Arm names in display order: host, stock, then the others.
    pub arm_order: Vec<String>,
    /// The stock arm's name, if any.
    pub stock: Option<String>,
    /// The host arm's name, if any.
    pub host: Option<String>,
    /// Each arm's role.
    pub roles: Ordered<Role>,
    /// Each arm's model.
    pub models: Ordered<ModelId>,
    /// What ggml-metal reported per arm (first run; bench bundles only).
    pub capabilities: Ordered<MetalReport>,
    /// What the shim reported per arm (bench bundles only).
    pub activation: Ordered<Activation>,
    /// llama.cpp builds seen, as `build_number (build_commit)`, per arm.
    pub llama_cpp_builds: Ordered<String>,
    /// Schema 6: each arm's median process duration in seconds, from the run order given;
    /// absent in schema 5.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub process_seconds: Option<Ordered<f64>>,
    /// Things a reader must know before trusting the figures.
    pub warnings: Vec<String>,
}

impl Summary {
    /// Arms that are neither stock nor host, in display order.
    pub fn other_arms(&self) -> Vec<&str> {
        self.arm_order
            .iter()
            .filter(|a| self.roles.get(a) == Some(&Role::Other))
            .map(String::as_str)
            .collect()
    }
}
