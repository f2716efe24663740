//! Family-wise verdicts (schema 6). A bench with several arms and tests prints several
//! intervals, and each 95% interval misses its truth 5% of the time: with `m` of them, one
//! verdict or another is wrong far more often than 5%. So each verdict (faster, slower, no
//! measurable difference) is read from its comparison's signed-rank interval at the level
//! `1 − 0.05/m` ([`verdict_level`]): by Bonferroni's inequality, all `m` of those intervals
//! cover their truths together with probability at least 95%, so all the verdicts of a bench
//! are right together with at least that probability, whatever the dependence between them
//! (the arms share stock's processes, the tests share each process). The table still prints
//! the 95% interval, and says the level its verdicts use.
//!
//! The signed-rank interval of `n` rounds reaches at most the level `1 − 2/2^n` (all signs
//! alike), so a verdict level may be out of reach: 6 rounds give at most 96.9%, below the
//! 97.5% that two intervals need. Such a verdict is `inconclusive`, and names the rounds that
//! would reach its level ([`rounds_for_level`]).

use super::interval::{CONFIDENCE_LEVEL, Interval, Verdict, verdict, walsh_bounds};
use super::ranks::critical_value;
use super::summary::{ArmStats, FamilyVerdict, Row, VerdictFamily};

/// The level each of `intervals` verdicts is read at, so that all of them together hold at
/// [`CONFIDENCE_LEVEL`]: `1 − (1 − CONFIDENCE_LEVEL) / intervals` (Bonferroni); 0.95 for one,
/// 0.975 for two, 0.9875 for four.
pub fn verdict_level(intervals: usize) -> f64 {
    1.0 - (1.0 - CONFIDENCE_LEVEL) / intervals.max(1) as f64
}

/// The fewest rounds whose signed-rank interval reaches `level` (a fraction in (0, 1)): the
/// smallest `n` with `2 / 2^n ≤ 1 − level` (6 for 0.95, 7 for 0.975, 8 for 0.9875).
pub fn rounds_for_level(level: f64) -> usize {
    (1..)
        .find(|&n| critical_value_at_least(n, level))
        .expect("some round count reaches any level below 1")
}

/// Whether `n` rounds reach `level`: the most extreme outcome alone is rare enough. Checked
/// in closed form, not by counting, so that it costs nothing for any `n`.
fn critical_value_at_least(n: usize, level: f64) -> bool {
    // P(W = 0) = 2^-n must be within the tail (1 − level) / 2, with critical_value's slack.
    n >= 64 || 0.5f64.powi(n as i32) <= (1.0 - level) / 2.0 * (1.0 + 1e-12)
}

/// The verdict of the paired log ratios `d` (sorted, finite) read at `level`: the
/// signed-rank interval at that level and what it shows against the noise band.
pub fn family_verdict(d: &[f64], level: f64) -> FamilyVerdict {
    match critical_value(d.len(), level) {
        Some((k, coverage)) => {
            let (low, high) = walsh_bounds(d, k);
            let interval = Interval {
                level,
                low: low.exp(),
                high: high.exp(),
            };
            FamilyVerdict {
                verdict: verdict(&interval),
                interval: Some(interval),
                coverage: Some(coverage),
                rounds_needed: None,
            }
        }
        None => FamilyVerdict {
            verdict: Verdict::Inconclusive,
            interval: None,
            coverage: None,
            rounds_needed: Some(rounds_for_level(level)),
        },
    }
}

/// `level` (a fraction) in percent to at most two decimals, trailing zeros dropped: 0.975 →
/// `97.5`, 0.9875 → `98.75`, 1 − 0.05/3 → `98.33`.
pub fn level_text(level: f64) -> String {
    let text = format!("{:.2}", level * 100.0);
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The note under the table for a verdict whose level its rounds cannot reach.
pub fn out_of_reach_text(rounds: usize, level: f64, needed: usize) -> String {
    format!(
        "inconclusive: its verdict needs a {}% interval (family-wise), and {rounds} rounds reach \
         at most {:.1}%; {needed} rounds reach it (capshim bench --rounds {needed})",
        level_text(level),
        100.0 * (1.0 - 2.0 * 0.5f64.powi(rounds as i32)),
    )
}

/// Reads every verdict of `rows` family-wise: `m` is the number of comparisons with a 95%
/// interval, each verdict is read at [`verdict_level`]`(m)` from the comparison's round ratios
/// (`verdict` and `verdict_basis` of each cell). Returns how.
pub fn apply(rows: &mut [Row]) -> VerdictFamily {
    let with_interval = |s: &ArmStats| s.speedup_ci95.is_some() && s.round_ratios.is_some();
    let intervals = rows
        .iter()
        .flat_map(|r| r.arms.0.iter())
        .filter_map(|(_, s)| s.as_ref())
        .filter(|s| with_interval(s))
        .count();
    let level = verdict_level(intervals);
    for stats in rows
        .iter_mut()
        .flat_map(|r| r.arms.0.iter_mut())
        .filter_map(|(_, s)| s.as_mut())
        .filter(|s| with_interval(s))
    {
        let ratios = stats.round_ratios.as_deref().unwrap_or_default();
        let mut d: Vec<f64> = ratios.iter().map(|r| r.ratio.ln()).collect();
        d.sort_by(f64::total_cmp);
        let basis = family_verdict(&d, level);
        stats.verdict = Some(basis.verdict);
        stats.verdict_basis = Some(basis);
    }
    VerdictFamily {
        family_level: CONFIDENCE_LEVEL,
        intervals,
        verdict_level: level,
        method: "Bonferroni: each verdict is read from its comparison's signed-rank interval at \
                 1 - (1 - family_level) / intervals, so that all verdicts hold together with \
                 probability at least family_level",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::interval::paired_ratio;

    #[test]
    fn levels_and_the_rounds_that_reach_them() {
        assert_eq!(verdict_level(1), CONFIDENCE_LEVEL);
        assert!((verdict_level(2) - 0.975).abs() < 1e-12);
        assert!((verdict_level(4) - 0.9875).abs() < 1e-12);
        assert_eq!(rounds_for_level(verdict_level(1)), 6);
        assert_eq!(rounds_for_level(verdict_level(2)), 7);
        assert_eq!(rounds_for_level(verdict_level(4)), 8);
        assert_eq!(rounds_for_level(verdict_level(8)), 9);
        // The closed form agrees with counting.
        for m in 1..40 {
            let level = verdict_level(m);
            let n = rounds_for_level(level);
            assert!(critical_value(n, level).is_some(), "m {m}");
            assert!(critical_value(n - 1, level).is_none(), "m {m}");
        }
    }

    #[test]
    fn six_rounds_cannot_reach_two_intervals_level() {
        let d: Vec<f64> = [1.10f64, 1.12, 1.09, 1.11, 1.13, 1.10]
            .iter()
            .map(|r| r.ln())
            .collect();
        let mut sorted = d.clone();
        sorted.sort_by(f64::total_cmp);
        // At 95% alone this is clearly faster; read at 97.5% it cannot be told.
        let one = family_verdict(&sorted, verdict_level(1));
        assert_eq!(one.verdict, Verdict::Faster);
        let two = family_verdict(&sorted, verdict_level(2));
        assert_eq!(two.verdict, Verdict::Inconclusive);
        assert_eq!((two.interval, two.rounds_needed), (None, Some(7)));
        let text = out_of_reach_text(6, verdict_level(2), 7);
        assert!(text.contains("97.5%") && text.contains("96.9%"), "{text}");
        assert!(text.contains("--rounds 7"), "{text}");
        assert_eq!(level_text(verdict_level(4)), "98.75");
        assert_eq!(level_text(verdict_level(3)), "98.33");
        assert_eq!(level_text(verdict_level(1)), "95");
    }

    #[test]
    fn at_the_single_level_the_verdict_is_schema_5s() {
        // m = 1: the same interval and verdict as paired_ratio and verdict give.
        let ratios = [1.10, 1.06, 0.98, 1.00, 1.08, 1.04, 0.96, 0.97, 1.30, 1.02];
        let pairs: Vec<_> = ratios
            .iter()
            .enumerate()
            .map(|(i, r)| crate::analysis::interval::RoundPair {
                round: i as u32 + 1,
                arm: 100.0 * r,
                reference: 100.0,
            })
            .collect();
        let p = paired_ratio(&pairs).unwrap();
        let mut d: Vec<f64> = ratios.iter().map(|r: &f64| r.ln()).collect();
        d.sort_by(f64::total_cmp);
        let f = family_verdict(&d, verdict_level(1));
        assert_eq!(f.interval, Some(p.interval));
        assert_eq!(f.verdict, verdict(&p.interval));
        // Wider at four intervals' level, and never narrower.
        let f4 = family_verdict(&d, verdict_level(4)).interval.unwrap();
        assert!(f4.low <= p.interval.low && f4.high >= p.interval.high);
        assert!(f4.high - f4.low > p.interval.high - p.interval.low);
    }
}
