//! The speedup's confidence interval, its verdict and its precision (docs/bench.md derives
//! the method and states its assumptions).
//!
//! The unit of replication is the llama-bench process: samples of one process share its
//! conditions (placement, clock, neighbours), so they say little about the next process.
//! Each round runs every arm once, next to each other, in an order drawn at random for that
//! round (`bench::schedule`); round `i` gives one figure per arm, the median of that process's
//! `samples_ts`, and one paired log ratio `d_i = ln(arm_i / stock_i)`.
//!
//! The interval is the Wilcoxon signed-rank interval of the `d_i` (the Hodges–Lehmann
//! interval: order statistics of the Walsh averages `(d_i + d_j) / 2`, `i ≤ j`). Because the
//! order within each round is a fair coin independent of everything else, its level holds by
//! the randomization alone: if the arm's speed is stock's times a constant `r` in any one
//! set of conditions, then `d_i − ln r` is the difference between the conditions of the
//! round's two process slots, with a sign that is the round's coin; so the signs of
//! `d_i − ln r` are fair coins and the signed-rank statistic has its textbook null
//! distribution, exactly, whatever the conditions are: drift, a periodic disturbance,
//! lingering neighbours, a slow process in a burst, heavy tails. The interval is the set of
//! `r` the signed-rank test does not reject. Its exact confidence (the rank statistic is
//! discrete) is at least [`CONFIDENCE_LEVEL`] and is reported ([`Paired::coverage`]).
//! For rounds not run by `capshim bench` (files given to `capshim report`), the same interval
//! holds when each round's `d_i − ln r` is symmetric about 0 and independent of the others.

use serde::Serialize;

use super::ranks::{critical_value, normal_quantile, walsh_count, walsh_nth};

/// The confidence level of every interval capshim computes and prints: it sets the
/// signed-rank critical count, the `95%` in every text and the `level` field of [`Interval`].
pub const CONFIDENCE_LEVEL: f64 = 0.95;

/// Half-width of the noise band, as a fraction (0.02 = ±2%): a speedup whose whole interval
/// lies within `[1 − NOISE, 1 + NOISE]` is "no measurable difference", and a speedup is called
/// faster or slower only when its whole interval lies beyond the band.
///
/// Why 2%: arms differ from stock in more than the shim (environment variables, an injected
/// library, the order of runs), and such differences move a process's speed by a few percent
/// with no cause worth reporting. In the A/A and inactive-shim studies of docs/bench.md the
/// arms' speedups stayed within ±2% of 1.00 at the defaults on a quiet machine; differences
/// below that are not a claim capshim makes.
pub const NOISE: f64 = 0.02;

/// The fewest paired rounds (llama-bench processes per arm) the interval needs: with 5 rounds
/// the most extreme signed-rank outcome has probability 2/32 > 5%, so no set of rounds could
/// exclude any ratio; with 6 it is 2/64. Below it no interval is given (`—`, JSON `null`) and
/// the report says why.
pub const MIN_ROUNDS: usize = 6;

/// A two-sided confidence interval of a ratio.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Interval {
    /// Its nominal confidence level, a fraction: [`CONFIDENCE_LEVEL`] (0.95) for the printed
    /// interval, the family-wise verdict level for a schema-6 verdict's own interval
    /// ([`super::family`]). The exact level is at least this ([`Paired::coverage`]).
    pub level: f64,
    /// Lower bound (a ratio, > 0).
    pub low: f64,
    /// Upper bound (a ratio, ≥ `low`).
    pub high: f64,
}

impl Interval {
    /// Whether `value` lies within the interval, bounds included.
    #[cfg(test)]
    pub fn contains(&self, value: f64) -> bool {
        self.low <= value && value <= self.high
    }
}

/// `level` (a fraction) in percent without a needless decimal: 0.95 → `95`, 0.995 → `99.5`.
pub fn percent_text(level: f64) -> String {
    let p = level * 100.0;
    if (p - p.round()).abs() < 1e-9 {
        format!("{:.0}", p)
    } else {
        format!("{p}")
    }
}

/// What the interval shows about a speedup, against the noise band ±[`NOISE`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The whole interval lies above `1 + NOISE`.
    Faster,
    /// The whole interval lies below `1 − NOISE`.
    Slower,
    /// The whole interval lies within `[1 − NOISE, 1 + NOISE]`.
    NoMeasurableDifference,
    /// The interval reaches across an edge of the band: more rounds are needed to tell.
    Inconclusive,
}

impl Verdict {
    /// The words printed after the interval.
    pub fn text(self) -> &'static str {
        match self {
            Verdict::Faster => "faster",
            Verdict::Slower => "slower",
            Verdict::NoMeasurableDifference => "no measurable difference",
            Verdict::Inconclusive => "inconclusive",
        }
    }
}

/// The verdict of a speedup's interval: faster or slower only when the whole interval lies
/// beyond the noise band, "no measurable difference" when it lies within it, inconclusive
/// otherwise. If the interval covers the true ratio with probability [`CONFIDENCE_LEVEL`],
/// each wrong call (faster or slower for a true ratio within the band, no measurable
/// difference for one beyond it, the wrong direction) has probability at most
/// `(1 − CONFIDENCE_LEVEL) / 2`.
pub fn verdict(interval: &Interval) -> Verdict {
    if interval.low > 1.0 + NOISE {
        Verdict::Faster
    } else if interval.high < 1.0 - NOISE {
        Verdict::Slower
    } else if interval.low >= 1.0 - NOISE && interval.high <= 1.0 + NOISE {
        Verdict::NoMeasurableDifference
    } else {
        Verdict::Inconclusive
    }
}

/// One round of a comparison: its number and each side's per-process figure, the median
/// `samples_ts` in tokens/s.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RoundPair {
    /// 1-based round.
    pub round: u32,
    /// The compared arm's median, tokens/s.
    pub arm: f64,
    /// The reference (stock) arm's median in the same round, tokens/s.
    pub reference: f64,
}

/// A speedup's interval and how precise it is.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Paired {
    /// The interval of the ratio arm / reference.
    #[serde(skip)]
    pub interval: Interval,
    /// The Hodges–Lehmann estimate of the ratio: `exp` of the median of the Walsh averages of
    /// the rounds' log ratios (the interval's own centre, which the ratio of medians need not be).
    pub center: f64,
    /// Half the interval's width on the log scale, as a fraction: the interval spans a factor
    /// of `(1 + h)²`; 0.03 reads "±3%".
    pub half_width: f64,
    /// Paired rounds used.
    pub rounds: usize,
    /// The interval's exact confidence level under the randomized run order, a fraction in
    /// `[CONFIDENCE_LEVEL, 1)`: 0.9512 at 10 rounds, 0.9575 at 12 (the rank statistic is
    /// discrete, and the interval takes the nearest level not below the nominal one).
    pub coverage: f64,
    /// Standard deviation of one round's log ratio around their mean (natural log units;
    /// 0.05 ≈ 5% from round to round); the interval does not use it, the rounds estimate does.
    pub sd_log: f64,
    /// Rounds that would bring the half-width within ±[`NOISE`], estimated from `sd_log`
    /// (schema 5: [`rounds_for_half_width`], about even odds; schema 6: [`rounds_for_chance`]
    /// with [`HINT_CHANCE`]); `null` when more than [`MAX_ROUNDS_ESTIMATE`].
    pub rounds_for_noise_band: Option<usize>,
}

/// The largest round count [`rounds_for_half_width`] estimates.
pub const MAX_ROUNDS_ESTIMATE: usize = 10_000;

/// Why a comparison has no interval.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NoInterval {
    /// Fewer than [`MIN_ROUNDS`] rounds have both arms.
    TooFewRounds {
        /// Rounds both arms have.
        paired: usize,
    },
    /// A median, or a round's ratio, is not a positive finite number.
    BadValue,
}

impl NoInterval {
    /// The reason, for a reader: why, and how many rounds are needed.
    pub fn text(&self) -> String {
        match self {
            NoInterval::TooFewRounds { paired } => format!(
                "no interval: {paired} round{} with both arms; the interval needs at least {MIN_ROUNDS} \
                 (llama-bench processes per arm: capshim bench --rounds {MIN_ROUNDS} or more)",
                if *paired == 1 { "" } else { "s" }
            ),
            NoInterval::BadValue => {
                "no interval: a round's median, or its ratio to stock's, is zero or not a finite number"
                    .to_string()
            }
        }
    }
}

/// The signed-rank (Hodges–Lehmann) interval of the ratio arm / reference from paired rounds
/// (see the module documentation), at [`CONFIDENCE_LEVEL`] or the nearest level above it.
///
/// # Errors
/// [`NoInterval`] with fewer than [`MIN_ROUNDS`] pairs, or a median or ratio that is not
/// positive and finite.
pub fn paired_ratio(pairs: &[RoundPair]) -> Result<Paired, NoInterval> {
    let ok = |v: f64| v.is_finite() && v > 0.0;
    if pairs.iter().any(|p| !ok(p.arm) || !ok(p.reference)) {
        return Err(NoInterval::BadValue);
    }
    let n = pairs.len();
    let Some((k, coverage)) = critical_value(n, CONFIDENCE_LEVEL) else {
        return Err(NoInterval::TooFewRounds { paired: n });
    };
    let mut d: Vec<f64> = pairs.iter().map(|p| (p.arm / p.reference).ln()).collect();
    // Positive finite medians can still have a ratio that overflows (1e300 / 1e-300).
    if d.iter().any(|x| !x.is_finite()) {
        return Err(NoInterval::BadValue);
    }
    d.sort_by(f64::total_cmp);
    let (low, high) = walsh_bounds(&d, k);
    let center = hodges_lehmann(&d);
    let mean = d.iter().sum::<f64>() / n as f64;
    let sd_log = (d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt();
    let reach = (high - low) / 2.0;
    Ok(Paired {
        interval: Interval {
            level: CONFIDENCE_LEVEL,
            low: low.exp(),
            high: high.exp(),
        },
        center: center.exp(),
        half_width: reach.exp() - 1.0,
        rounds: n,
        coverage,
        sd_log,
        rounds_for_noise_band: rounds_for_half_width(sd_log, NOISE),
    })
}

/// The `(k + 1)`-th smallest and `(k + 1)`-th largest Walsh averages of the sorted log ratios
/// `d`: the signed-rank interval for the critical count `k` ([`critical_value`]).
pub fn walsh_bounds(d: &[f64], k: u64) -> (f64, f64) {
    let walsh = walsh_count(d.len());
    (walsh_nth(d, k), walsh_nth(d, walsh - 1 - k))
}

/// The Hodges–Lehmann estimate of the sorted log ratios `d` (at least one): the median of
/// their Walsh averages, the point the signed-rank interval is built around.
pub fn hodges_lehmann(d: &[f64]) -> f64 {
    let walsh = walsh_count(d.len());
    if walsh % 2 == 1 {
        walsh_nth(d, walsh / 2)
    } else {
        (walsh_nth(d, walsh / 2 - 1) + walsh_nth(d, walsh / 2)) / 2.0
    }
}

/// The rounds whose interval would have a half-width within `target` (a fraction) when one
/// round's log ratio varies with standard deviation `sd_log`: the signed-rank interval's
/// half-width is about `z · sd_log · √(π / 3) / √n` (its large-sample form: the Wilcoxon
/// interval is `√(π/3)` times as wide as a normal-theory one on normal data), so
/// `n = (z · sd_log · √(π/3) / ln(1 + target))²`, at least [`MIN_ROUNDS`]. From the rounds'
/// observed spread rather than from the interval's own width, which at a few rounds is
/// the range of the ratios and does not narrow as `1/√n`. `None` above [`MAX_ROUNDS_ESTIMATE`].
pub fn rounds_for_half_width(sd_log: f64, target: f64) -> Option<usize> {
    let z = normal_quantile(CONFIDENCE_LEVEL);
    let per_round = z * sd_log * (std::f64::consts::PI / 3.0).sqrt();
    let needed = (per_round / (1.0 + target).ln()).powi(2).ceil();
    if !needed.is_finite() || needed > MAX_ROUNDS_ESTIMATE as f64 {
        return None;
    }
    Some((needed as usize).max(MIN_ROUNDS))
}

/// The chance schema 6's rounds hint aims at: with the rounds it gives, the half-width
/// is within the noise band with this probability (when the rounds' spread is as measured).
pub const HINT_CHANCE: f64 = 0.8;

/// The fewest rounds whose interval's half-width is within `target` (a fraction) with
/// probability `chance` (in (0.5, 1)), when one round's log ratio varies with standard
/// deviation `sd_log` (schema 6's hint, with [`HINT_CHANCE`]). The half-width of `n` rounds is
/// taken as the signed-rank interval's large-sample form with the small-sample quantile,
/// `t(n−1) · s · √(π/3) / √n`, where the rounds' own spread `s` varies as
/// `sd_log · √(χ²(n−1) / (n−1))`; its `chance`-quantile must be within `ln(1 + target)`.
/// Checked by simulation (`calibration6`). At least [`MIN_ROUNDS`]; `None` above
/// [`MAX_ROUNDS_ESTIMATE`].
pub fn rounds_for_chance(sd_log: f64, target: f64, chance: f64) -> Option<usize> {
    let band = (1.0 + target).ln();
    let quantile = |n: usize| {
        let df = n - 1;
        // The interval's width rests on a few Walsh averages near its ends, and varies from
        // bench to bench about as a spread estimated from two thirds of the rounds would.
        let spread_df = (2 * df / 3).max(1);
        let spread =
            (super::ranks::chi_square_quantile(chance, spread_df) / spread_df as f64).sqrt();
        super::ranks::t_quantile(CONFIDENCE_LEVEL, df)
            * (std::f64::consts::PI / 3.0).sqrt()
            * sd_log
            * spread
            / (n as f64).sqrt()
    };
    if !sd_log.is_finite() || sd_log < 0.0 {
        return None;
    }
    if quantile(MIN_ROUNDS) <= band {
        return Some(MIN_ROUNDS);
    }
    if quantile(MAX_ROUNDS_ESTIMATE) > band {
        return None;
    }
    // The quantile falls with n: bisect for the first n within the band.
    let (mut lo, mut hi) = (MIN_ROUNDS, MAX_ROUNDS_ESTIMATE);
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if quantile(mid) <= band {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(ratios: &[f64]) -> Vec<RoundPair> {
        ratios
            .iter()
            .enumerate()
            .map(|(i, r)| RoundPair {
                round: i as u32 + 1,
                arm: 100.0 * r,
                reference: 100.0,
            })
            .collect()
    }

    #[test]
    fn the_interval_is_the_signed_rank_interval() {
        // Ten rounds; by hand: the 9th smallest and 9th largest of the 55 Walsh averages.
        let ratios = [1.10, 1.06, 0.98, 1.00, 1.08, 1.04, 0.96, 0.97, 1.30, 1.02];
        let p = paired_ratio(&pairs(&ratios)).unwrap();
        let logs: Vec<f64> = ratios.iter().map(|r: &f64| r.ln()).collect();
        let mut walsh: Vec<f64> = (0..10)
            .flat_map(|i| {
                (i..10)
                    .map(|j| (logs[i] + logs[j]) / 2.0)
                    .collect::<Vec<_>>()
            })
            .collect();
        walsh.sort_by(f64::total_cmp);
        assert_eq!(walsh.len(), 55);
        assert!((p.interval.low - walsh[8].exp()).abs() < 1e-12);
        assert!((p.interval.high - walsh[46].exp()).abs() < 1e-12);
        assert!((p.center - walsh[27].exp()).abs() < 1e-12);
        assert!((p.half_width - ((walsh[46] - walsh[8]) / 2.0).exp() + 1.0).abs() < 1e-12);
        assert_eq!(p.rounds, 10);
        assert_eq!(p.interval.level, CONFIDENCE_LEVEL);
        assert!((p.coverage - 0.951_171_875).abs() < 1e-12);
        // One wild round moves the centre little: the 1.30 round is one Walsh average in 55.
        assert!(p.center > 1.0 && p.center < 1.05, "{p:?}");
    }

    #[test]
    fn over_every_coin_the_interval_covers_the_truth_at_its_stated_level() {
        // The randomization argument, checked by enumeration: fixed, lopsided slot
        // differences (a slow process in a burst, drift, a periodic disturbance), and a true
        // ratio of 1.3; each of the 2^10 coin outcomes gives d_i = ln 1.3 ± a_i. The share of
        // outcomes whose interval covers 1.3 is exactly the reported coverage.
        let slots = [0.9, 0.85, 0.02, -0.01, 0.03, 0.6, 0.001, -0.05, 0.07, 0.3];
        let truth: f64 = 1.3;
        let mut covered = 0;
        let mut coverage = 0.0;
        for coins in 0u32..1 << slots.len() {
            let ratios: Vec<f64> = slots
                .iter()
                .enumerate()
                .map(|(i, a)| {
                    let sign = if coins >> i & 1 == 1 { -1.0 } else { 1.0 };
                    (truth.ln() + sign * a).exp()
                })
                .collect();
            let p = paired_ratio(&pairs(&ratios)).unwrap();
            coverage = p.coverage;
            covered += usize::from(
                p.interval.low <= truth * (1.0 + 1e-12) && truth <= p.interval.high * (1.0 + 1e-12),
            );
        }
        let share = covered as f64 / 1024.0;
        assert!((share - coverage).abs() < 1e-12, "{share} vs {coverage}");
    }

    #[test]
    fn too_few_rounds_give_no_interval_and_say_how_many_are_needed() {
        for n in 0..MIN_ROUNDS {
            let err = paired_ratio(&pairs(&vec![1.0; n])).unwrap_err();
            assert_eq!(err, NoInterval::TooFewRounds { paired: n });
            let text = err.text();
            assert!(text.contains(&format!("at least {MIN_ROUNDS}")), "{text}");
            assert!(text.contains("--rounds 6"), "{text}");
        }
        assert!(paired_ratio(&pairs(&[1.0; MIN_ROUNDS])).is_ok());
        let mut bad = pairs(&[1.0; 6]);
        bad[2].reference = 0.0;
        assert_eq!(paired_ratio(&bad), Err(NoInterval::BadValue));
        // Each median finite and positive, their ratio not.
        let mut bad = pairs(&[1.0; 6]);
        (bad[0].arm, bad[0].reference) = (1e300, 1e-300);
        assert_eq!(paired_ratio(&bad), Err(NoInterval::BadValue));
        // Identical rounds: a point.
        let p = paired_ratio(&pairs(&[1.25; 8])).unwrap();
        assert_eq!(
            (p.interval.low, p.interval.high, p.half_width),
            (1.25, 1.25, 0.0)
        );
    }

    #[test]
    fn verdicts_follow_the_band() {
        let at = |low, high| {
            verdict(&Interval {
                level: CONFIDENCE_LEVEL,
                low,
                high,
            })
        };
        assert_eq!(at(7.13, 7.26), Verdict::Faster);
        assert_eq!(at(0.5, 0.9), Verdict::Slower);
        assert_eq!(at(0.99, 1.015), Verdict::NoMeasurableDifference);
        assert_eq!(
            at(1.0 - NOISE, 1.0 + NOISE),
            Verdict::NoMeasurableDifference
        );
        // Beyond 1.00 but not beyond the band: never a speedup.
        assert_eq!(at(1.005, 1.03), Verdict::Inconclusive);
        assert_eq!(at(1.01, 1.019), Verdict::NoMeasurableDifference);
        assert_eq!(at(0.9, 1.1), Verdict::Inconclusive);
        assert_eq!(at(1.0 + NOISE, 1.1), Verdict::Inconclusive);
    }

    #[test]
    fn rounds_needed_follow_the_large_sample_width() {
        // 5% per round: (1.96 × 0.05 × √(π/3) / ln 1.02)² = 25.6, so 26 rounds.
        assert_eq!(rounds_for_half_width(0.05, NOISE), Some(26));
        // Twice the spread, four times the rounds (within rounding up).
        assert_eq!(rounds_for_half_width(0.10, NOISE), Some(103));
        // Never fewer than the interval needs; beyond the estimate's range, none.
        assert_eq!(rounds_for_half_width(0.0, NOISE), Some(MIN_ROUNDS));
        assert_eq!(rounds_for_half_width(10.0, NOISE), None);
        // Checked against the interval itself: rounds of exactly normal-scored spread (the
        // expected order statistics' shape) at the estimate reach the band, within a few
        // percent, where the estimate has about 26 rounds.
        let n = rounds_for_half_width(0.05, NOISE).unwrap();
        let scores: Vec<f64> = (1..=n)
            .map(|i| {
                let p = (i as f64 - 0.375) / (n as f64 + 0.25);
                let z = normal_quantile((2.0 * p - 1.0).abs());
                if p < 0.5 { -z } else { z }
            })
            .collect();
        let mean = scores.iter().sum::<f64>() / n as f64;
        let sd = (scores.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt();
        let ratios: Vec<f64> = scores.iter().map(|z| (0.05 * z / sd).exp()).collect();
        let p = paired_ratio(&pairs(&ratios)).unwrap();
        assert!((p.sd_log - 0.05).abs() < 1e-12);
        let band = (1.0 + NOISE).ln();
        let reach = (1.0 + p.half_width).ln();
        assert!((reach / band - 1.0).abs() < 0.1, "{reach} vs {band}");
    }
}
