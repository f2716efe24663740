//! `summary.json` of a tune bundle: what [`super::derive`] derives and [`super::render`]
//! shows.

use serde::Serialize;

use super::manifest::SettingRecord;

/// The verdict of one verify run, as its bundle says.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct VerifyResult {
    /// The candidate's label.
    pub label: String,
    /// `equivalent`, `different`, `not run`, or `failed` when the verify bundle holds no
    /// verdict for it (verify stopped); for a `--check` run, `passed` or `failed`.
    pub verdict: String,
    /// The verify bundle, relative to the tune bundle.
    pub bundle: String,
}

/// A run recorded as failed (`--keep-going`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FailedRun {
    /// The arm's label (a candidate's, or the reference's).
    pub arm: String,
    /// The round, counted over the whole run.
    pub round: u32,
    /// Why it failed, as recorded.
    pub reason: String,
}

/// One candidate in `summary.json`, in the order the search ranked them (later stages
/// first, then by estimate).
#[derive(Serialize)]
pub struct CandidateSummary {
    /// Its label.
    pub label: String,
    /// What it changes from the reference.
    pub settings: Vec<SettingRecord>,
    /// Rounds it ran against the reference.
    pub rounds: usize,
    /// Its ratio to the reference in each of those rounds, in the order run.
    pub round_ratios: Vec<f64>,
    /// Hodges–Lehmann estimate of its throughput over the reference's (a ratio).
    pub estimate: Option<f64>,
    /// The interval the winner rule read: low end (a ratio).
    pub interval_low: Option<f64>,
    /// Its high end.
    pub interval_high: Option<f64>,
    /// Its nominal level.
    pub interval_level: Option<f64>,
    /// The stage after which it was eliminated, `null` when it stayed to the end.
    pub eliminated_after: Option<usize>,
    /// The stage after which it was added (a combination), `null` for a single knob.
    pub added_after_stage: Option<usize>,
}

/// `summary.json`.
#[derive(Serialize)]
pub struct Summary {
    /// The layout.
    pub schema_version: u32,
    /// Always `tune`.
    pub kind: &'static str,
    /// The model's file name (empty with `--command`).
    pub model: String,
    /// With `--command`: the command tuned (its wall time).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// With `--command`: the `--check` command, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub check: Option<String>,
    /// The reference arm's label.
    pub reference: String,
    /// The budget, in seconds.
    pub budget_seconds: f64,
    /// What a winner must beat: its interval's low end above 1 + band.
    pub band: f64,
    /// Why the search ended: `complete` or `budget`.
    pub ended: String,
    /// The level of the winner rule's intervals, `1 − 0.05 / m` for the `m` candidates that
    /// ran (a fraction; 1 when none ran).
    pub level: f64,
    /// The rounds a candidate needs for an interval at `level` (the fewest `n` with
    /// `2 / 2^n ≤ 1 − level`: 6 at 95%, 9 at 99.29% for 7 candidates).
    pub rounds_needed: usize,
    /// Whether there is no winner because no candidate that stayed to the end ran
    /// `rounds_needed` rounds: too few rounds to tell, not a finding that nothing is faster.
    pub too_few_rounds: bool,
    /// Every candidate, in the order the search ranked them: the winner, those that stayed to
    /// the end, then those eliminated later before those eliminated earlier, each group by
    /// estimate.
    pub candidates: Vec<CandidateSummary>,
    /// The winner's label: verified `equivalent` and beating the reference beyond the band.
    pub winner: Option<String>,
    /// The verify run of the winner (or, with none, the last one run); `null` when none ran.
    pub verify: Option<VerifyResult>,
    /// Every verify run, in order.
    pub verify_runs: Vec<VerifyResult>,
    /// The recommendation profile file in the bundle, with a winner that has a profile.
    pub recommendation: Option<&'static str>,
    /// The knobs left out, each with why.
    pub left_out: Vec<String>,
    /// Every run recorded as failed (`--keep-going`), in the order run.
    pub failed_runs: Vec<FailedRun>,
    /// What the reader must know: each arm with failed runs, and those with no result at all.
    pub warnings: Vec<String>,
}
