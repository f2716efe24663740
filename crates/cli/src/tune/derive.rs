//! A tune bundle's derived files from its raw files and manifest: the search replayed from
//! every round's figures, the verify verdicts read from the verify bundles inside it, the
//! winner decided, then `summary.json`, `report.md` and the recommendation profile
//! ([`super::render`]). The run and `capshim report` derive the same way, so a bundle whose
//! files were edited no longer matches.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::figure::{log_ratio, medians};
use super::manifest::{Manifest, RECOMMENDATION, RoundRecord, SCHEMA_VERSION, VerifyRecord};
use super::render;
use super::search::{Config, Halving, Outcome, Stage};
use super::summary::{CandidateSummary, FailedRun, Summary, VerifyResult};
use crate::analysis::family::rounds_for_level;
use crate::analysis::interval::MIN_ROUNDS;
use crate::llama::{TestKey, read_bench_file};

/// Why the derived files cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum DeriveError {
    /// A raw file of a run not recorded as failed gives no result.
    #[error("{path} gives no llama-bench result ({why}), yet its run is not recorded as failed")]
    NoResult {
        /// The file.
        path: PathBuf,
        /// Why.
        why: String,
    },
    /// The manifest (`environment.json`'s `tune`) does not describe a search this capshim
    /// replays.
    #[error("environment.json: {0}")]
    Manifest(String),
}

/// Reads the verdict of `record`'s candidate from its verify bundle under `dir` (`passed` or
/// `failed` for a `--check` run, by its exit code).
pub fn verify_result(dir: &Path, record: &VerifyRecord) -> VerifyResult {
    if record.check {
        return VerifyResult {
            label: record.label.clone(),
            verdict: if record.exit_code == Some(0) {
                "passed"
            } else {
                "failed"
            }
            .to_string(),
            bundle: record.bundle.clone(),
        };
    }
    // Only a verify that reached its verdicts (exit 0, or 5 when an arm differs) sealed its
    // bundle, which `report` then checks (`super::check`); any other run gave no verdict, and
    // whatever an unsealed bundle's files say is not read.
    if !matches!(record.exit_code, Some(0 | 5)) {
        return VerifyResult {
            label: record.label.clone(),
            verdict: "failed".to_string(),
            bundle: record.bundle.clone(),
        };
    }
    let path = dir.join(&record.bundle).join("summary.json");
    let verdict = std::fs::read_to_string(&path)
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| {
            v["arms"][&record.label]["verdict"]
                .as_str()
                .map(String::from)
        })
        .unwrap_or_else(|| "failed".to_string());
    VerifyResult {
        label: record.label.clone(),
        verdict,
        bundle: record.bundle.clone(),
    }
}

/// The candidates a winner may be, best first: the search's winner, then every other
/// candidate whose interval lies wholly above the band, in ranking order. Verify checks them in
/// this order until one is `equivalent`.
pub fn qualifying(outcome: &Outcome, band: f64) -> Vec<usize> {
    let Some(winner) = outcome.winner else {
        return Vec::new();
    };
    let mut out = vec![winner];
    out.extend(
        outcome
            .ranking
            .iter()
            .filter(|r| r.candidate != winner)
            .filter(|r| r.interval.as_ref().is_some_and(|i| i.low > 1.0 + band))
            .map(|r| r.candidate),
    );
    out
}

/// The verdicts that accept a candidate: verify's `equivalent`, a `--check` run's `passed`.
pub fn accepted(verdict: &str) -> bool {
    verdict == "equivalent" || verdict == "passed"
}

/// The winner: the first qualifying candidate verified `equivalent` (or whose `--check`
/// passed).
pub fn winner(qualifying: &[usize], labels: &[String], verified: &[VerifyResult]) -> Option<usize> {
    qualifying.iter().copied().find(|&c| {
        verified
            .iter()
            .any(|v| v.label == labels[c] && accepted(&v.verdict))
    })
}

/// Every round's figure per candidate: `(stage index, candidate) -> log ratios in round order`.
type Figures = HashMap<(usize, usize), Vec<f64>>;

/// One round's figures: `(candidate, log ratio)` for every candidate whose run and the
/// reference's both gave a result (`labels`: the candidates' labels, by index). A llama-bench
/// round compares throughputs (candidate / reference); a `--command` round compares wall
/// times, lower is better (reference / candidate), so a higher figure is better in both.
///
/// # Errors
/// [`DeriveError`] when a run not recorded as failed gives no result, or names no candidate.
pub fn round_figures(
    dir: &Path,
    m: &Manifest,
    labels: &[String],
    round: &RoundRecord,
) -> Result<Vec<(usize, f64)>, DeriveError> {
    let command = m.command.is_some();
    let mut got: Vec<(&str, Vec<(TestKey, f64)>)> = Vec::new();
    for run in round.runs.iter().filter(|r| r.failed.is_none()) {
        let path = dir.join(&run.json);
        let medians = if command {
            // One "test" whose figure is the inverse of the wall time: higher is better.
            let seconds = run
                .seconds
                .filter(|s| s.is_finite() && *s > 0.0)
                .ok_or_else(|| DeriveError::NoResult {
                    path: path.clone(),
                    why: "its run has no wall time".into(),
                })?;
            vec![(
                TestKey::command(crate::llama::bench_json::Quantity::Wall),
                1.0 / seconds,
            )]
        } else {
            let rows = read_bench_file(&path).map_err(|e| DeriveError::NoResult {
                path: path.clone(),
                why: e.to_string(),
            })?;
            medians(&rows)
        };
        got.push((run.arm.as_str(), medians));
    }
    let reference = m.reference.as_str();
    let Some((_, base)) = got.iter().find(|(arm, _)| *arm == reference) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for (arm, meds) in got.iter().filter(|(arm, _)| *arm != reference) {
        let Some(c) = labels.iter().position(|l| l == arm) else {
            return Err(DeriveError::Manifest(format!(
                "tune.stages: round {} names an arm {arm:?} that is no candidate",
                round.round
            )));
        };
        if let Some(f) = log_ratio(base, meds) {
            out.push((c, f));
        }
    }
    Ok(out)
}

/// Reads every process's medians and makes each round's figures.
fn figures(dir: &Path, m: &Manifest) -> Result<Figures, DeriveError> {
    let labels: Vec<String> = m.candidates.iter().map(|c| c.label.clone()).collect();
    let mut out = Figures::new();
    for (s, stage) in m.stages.iter().enumerate() {
        for round in &stage.rounds {
            for (c, f) in round_figures(dir, m, &labels, round)? {
                out.entry((s, c)).or_default().push(f);
            }
        }
    }
    Ok(out)
}

/// The search replayed from the manifest's stages and the rounds' figures.
///
/// # Errors
/// [`DeriveError::Manifest`] for a value the replay cannot take ([`Manifest::bad_value`]), a
/// candidate run before it was added or candidates that do not add up; [`DeriveError::NoResult`].
pub fn replay(dir: &Path, m: &Manifest) -> Result<Halving, DeriveError> {
    if let Some(bad) = m.bad_value() {
        return Err(DeriveError::Manifest(bad));
    }
    let figures = figures(dir, m)?;
    let mut halving = Halving::new(
        m.initial(),
        Config {
            first_rounds: m.first_rounds,
            band: m.band,
        },
    );
    let mut known = m.initial();
    for (s, stage) in m.stages.iter().enumerate() {
        if stage.added > 0 {
            let added = halving.add(stage.added);
            known = added.end;
        }
        if let Some(bad) = stage.alive.iter().find(|&&c| c >= known) {
            return Err(DeriveError::Manifest(format!(
                "tune.stages: candidate {bad} runs in stage {} before it was added",
                stage.number
            )));
        }
        let logs: Vec<Vec<f64>> = stage
            .alive
            .iter()
            .map(|c| figures.get(&(s, *c)).cloned().unwrap_or_default())
            .collect();
        let planned = Stage {
            number: stage.number,
            alive: stage.alive.clone(),
            rounds: stage.rounds_planned,
        };
        halving.record(&planned, &logs);
    }
    // Candidates added after the last stage that ran (the time was up before they could).
    if known < m.candidates.len()
        && m.candidates[known..]
            .iter()
            .all(|c| c.added_after_stage.is_some())
    {
        known = halving.add(m.candidates.len() - known).end;
    }
    if known != m.candidates.len() {
        return Err(DeriveError::Manifest(format!(
            "tune.candidates lists {} candidates, but the stages add up to {known}",
            m.candidates.len()
        )));
    }
    Ok(halving)
}

/// One warning per arm with failed runs: how many of its runs failed, in which rounds and why
/// (the first reason), and whether it has no result at all.
fn failure_warnings(m: &Manifest, failed: &[FailedRun]) -> Vec<String> {
    let mut arms: Vec<&str> = Vec::new();
    for f in failed {
        if !arms.contains(&f.arm.as_str()) {
            arms.push(&f.arm);
        }
    }
    arms.iter()
        .map(|arm| {
            let mine: Vec<&FailedRun> = failed.iter().filter(|f| f.arm == *arm).collect();
            let ran = m
                .stages
                .iter()
                .flat_map(|s| &s.rounds)
                .flat_map(|r| &r.runs)
                .filter(|r| r.arm == *arm)
                .count();
            let rounds: Vec<String> = mine.iter().map(|f| f.round.to_string()).collect();
            let who = if *arm == m.reference {
                format!("the reference `{arm}`")
            } else {
                format!("`{arm}`")
            };
            let what = if mine.len() == ran {
                format!(
                    "every run of {who} failed ({ran}): it has no result, and the search went on \
                     without it"
                )
            } else {
                format!(
                    "{} of {ran} runs of {who} failed (rounds {}): those rounds give it no figure",
                    mine.len(),
                    rounds.join(", ")
                )
            };
            format!("{what}; first reason: {}", mine[0].reason)
        })
        .collect()
}

/// The derived files, in the order they are written, and the summary.
pub struct Derived {
    /// `(file, text)`.
    pub files: Vec<(&'static str, String)>,
    /// The winner's label.
    pub winner: Option<String>,
    /// The warnings of `summary.json`, for the terminal.
    pub warnings: Vec<String>,
    /// The result in words, for the terminal: `winner LABEL`, `no setting beats the reference
    /// here`, or too few rounds to tell.
    pub verdict: String,
}

impl Derived {
    /// The text of derived file `name` (empty when absent).
    pub fn text(&self, name: &str) -> &str {
        self.files
            .iter()
            .find(|(n, _)| *n == name)
            .map_or("", |(_, t)| t.as_str())
    }
}

/// Derives a tune bundle's files from `dir`'s raw files and the manifest `m`.
///
/// # Errors
/// [`DeriveError`] when a raw file cannot be read or gives no result, or the manifest does not
/// describe a search.
pub fn derive(dir: &Path, m: &Manifest) -> Result<Derived, DeriveError> {
    let halving = replay(dir, m)?;
    let outcome = halving.outcome();
    let labels: Vec<String> = m.candidates.iter().map(|c| c.label.clone()).collect();
    let verified: Vec<VerifyResult> = m.verify.iter().map(|v| verify_result(dir, v)).collect();
    let qualifying = qualifying(&outcome, m.band);
    // A command tuned without --check has nothing to verify it with: the search's winner stands
    // unchecked, and the report says so.
    let winner = if m.command.is_some() && m.check.is_none() {
        qualifying.first().copied()
    } else {
        winner(&qualifying, &labels, &verified)
    };
    let failed_runs: Vec<FailedRun> = m
        .stages
        .iter()
        .flat_map(|s| &s.rounds)
        .flat_map(|r| {
            r.runs.iter().filter_map(move |run| {
                run.failed.as_ref().map(|reason| FailedRun {
                    arm: run.arm.clone(),
                    round: r.round,
                    reason: reason.clone(),
                })
            })
        })
        .collect();
    let warnings = failure_warnings(m, &failed_runs);
    let tested = outcome.ranking.iter().filter(|r| r.rounds > 0).count();
    let level = if tested == 0 {
        1.0
    } else {
        super::search::winner_level(tested)
    };
    let rounds_needed = if tested == 0 {
        MIN_ROUNDS
    } else {
        rounds_for_level(level)
    };
    let too_few_rounds = winner.is_none()
        && !outcome
            .ranking
            .iter()
            .any(|r| r.eliminated_after.is_none() && r.rounds >= rounds_needed);
    let recommendation = winner
        .filter(|&w| m.candidates[w].resolved.apple_family_max.is_some())
        .map(|_| RECOMMENDATION);
    let summary = Summary {
        schema_version: SCHEMA_VERSION,
        kind: "tune",
        model: m.model.clone(),
        command: m.command.clone(),
        check: m.check.clone(),
        reference: m.reference.clone(),
        budget_seconds: m.budget_seconds,
        band: m.band,
        ended: m.ended.clone(),
        level,
        rounds_needed,
        too_few_rounds,
        candidates: outcome
            .ranking
            .iter()
            .map(|r| {
                let c = &m.candidates[r.candidate];
                CandidateSummary {
                    label: c.label.clone(),
                    settings: c.settings.clone(),
                    rounds: r.rounds,
                    round_ratios: halving.logs(r.candidate).iter().map(|l| l.exp()).collect(),
                    estimate: r.estimate,
                    interval_low: r.interval.as_ref().map(|i| i.low),
                    interval_high: r.interval.as_ref().map(|i| i.high),
                    interval_level: r.interval.as_ref().map(|i| i.level),
                    eliminated_after: r.eliminated_after,
                    added_after_stage: c.added_after_stage,
                }
            })
            .collect(),
        winner: winner.map(|w| labels[w].clone()),
        verify: winner
            .and_then(|w| verified.iter().find(|v| v.label == labels[w]))
            .or(verified.last())
            .cloned(),
        verify_runs: verified,
        recommendation,
        left_out: m.left_out.clone(),
        failed_runs,
        warnings,
    };
    let summary_json = serde_json::to_string_pretty(&summary).expect("a summary serializes") + "\n";
    let mut files = vec![
        ("summary.json", summary_json),
        ("report.md", render::markdown(&summary)),
    ];
    if let (Some(w), Some(name)) = (winner, recommendation) {
        files.push((name, render::profile_file(&m.candidates[w])));
    }
    Ok(Derived {
        files,
        warnings: summary.warnings.clone(),
        verdict: render::headline(&summary),
        winner: summary.winner,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::interval::Interval;
    use crate::tune::search::Ranked;

    fn ranked(candidate: usize, low: Option<f64>) -> Ranked {
        Ranked {
            candidate,
            rounds: 12,
            estimate: Some(1.1),
            interval: low.map(|low| Interval {
                level: 0.99,
                low,
                high: low + 0.1,
            }),
            eliminated_after: None,
        }
    }

    #[test]
    fn the_winner_is_the_first_qualifying_candidate_verified_equivalent() {
        let outcome = Outcome {
            ranking: vec![
                ranked(2, Some(1.05)),
                ranked(0, Some(1.01)),
                ranked(1, Some(1.03)),
                ranked(3, None),
            ],
            winner: Some(2),
        };
        // The search's winner first, then the others above the band in ranking order.
        assert_eq!(qualifying(&outcome, 0.02), [2, 1]);
        assert!(
            qualifying(
                &Outcome {
                    winner: None,
                    ..outcome.clone()
                },
                0.02
            )
            .is_empty()
        );
        let labels: Vec<String> = ["a", "b", "c", "d"].map(String::from).to_vec();
        let v = |label: &str, verdict: &str| VerifyResult {
            label: label.into(),
            verdict: verdict.into(),
            bundle: format!("verify-{label}"),
        };
        let q = qualifying(&outcome, 0.02);
        assert_eq!(winner(&q, &labels, &[]), None);
        assert_eq!(winner(&q, &labels, &[v("c", "different")]), None);
        assert_eq!(
            winner(&q, &labels, &[v("c", "different"), v("b", "equivalent")]),
            Some(1)
        );
        // A verdict for a candidate that does not qualify makes no winner.
        assert_eq!(winner(&q, &labels, &[v("a", "equivalent")]), None);
    }
}
