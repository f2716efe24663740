//! The speedup's confidence interval, its verdict and its precision (docs/bench.md derives
//! the method and states its assumptions).
//!
//! The unit of replication is the llama-bench process: samples of one process share its
//! conditions (placement, clock, neighbours), so they say little about the next process.
//! Each round runs every arm once, next to each other; round `i` gives one figure per arm,
//! the median of that process's `samples_ts`, and one paired log ratio
//! `d_i = ln(arm_i / stock_i)`. Rounds run the arms in the listed order or in reverse, in pairs
//! of rounds ([`reversed`]: forward, forward, reverse, reverse, ...), so the rounds form the two
//! sequences of an AB/BA crossover: the estimate is the mean of the two sequences' mean log
//! ratios, which cancels a period effect (the arm that runs second is faster) and a linear
//! drift, and its variance comes from the spread of `d_i` within each sequence, with `n − 2`
//! degrees of freedom (Student's t). Everything a round shares with its neighbour cancels in
//! `d_i`. Reversing in pairs, not every round (ABBA), puts the same arm twice in a row at only
//! half of the round boundaries: conditions that linger from one process into the next then
//! help one arm as often as the other, instead of always the same one across a boundary, which
//! made neighbouring rounds' ratios correlate and the ABBA interval too narrow.

use serde::Serialize;

/// The confidence level of every interval capshim computes and prints: it sets the Student
/// t quantile, the `95%` in every text and the `level` field of [`Interval`].
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

/// The fewest paired rounds (llama-bench processes per arm) the interval needs: two of each
/// run order, so that each order's spread is measured (`n − 2 = 2` degrees of freedom).
/// Below it no interval is given (`—`, JSON `null`) and the report says why.
pub const MIN_ROUNDS: usize = 4;

/// A two-sided confidence interval of a ratio.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Interval {
    /// Its confidence level, a fraction (0.95): [`CONFIDENCE_LEVEL`].
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

/// Whether round `round` (1-based) runs the arms in reverse order: rounds 1 and 2 forward,
/// 3 and 4 reversed, 5 and 6 forward, ... The bench schedule and the interval's two sequences
/// both follow it.
pub fn reversed(round: u32) -> bool {
    (round.saturating_sub(1) / 2) % 2 == 1
}

/// One round of a comparison: its number (which gives its run order, [`reversed`]) and each
/// side's per-process figure, the median `samples_ts` in tokens/s.
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
    /// The interval's centre: the crossover estimate of the ratio (geometric, per round).
    pub center: f64,
    /// Half the interval's width on the log scale, as a fraction: the interval is
    /// `center / (1 + h) ..= center × (1 + h)`; 0.03 reads "±3%".
    pub half_width: f64,
    /// Paired rounds used.
    pub rounds: usize,
    /// Degrees of freedom of the t quantile: `rounds − 2`.
    pub df: usize,
    /// Standard deviation of one round's log ratio around its run order's mean (natural log
    /// units; 0.05 ≈ 5% from round to round).
    pub sd_log: f64,
    /// Rounds that would bring the half-width within ±[`NOISE`] at this `sd_log` (an
    /// estimate: `sd_log` is itself measured); `null` when more than [`MAX_ROUNDS_ESTIMATE`].
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
    /// Every paired round ran the arms in the same order.
    OneOrder,
    /// A median is not a positive finite number.
    BadValue,
}

impl NoInterval {
    /// The reason, for a reader: why, and how many rounds are needed.
    pub fn text(&self) -> String {
        match self {
            NoInterval::TooFewRounds { paired } => format!(
                "no interval: {paired} round{} with both arms; the interval needs at least {MIN_ROUNDS} \
                 (llama-bench processes per arm, run in both orders: capshim bench --rounds {MIN_ROUNDS} or more)",
                if *paired == 1 { "" } else { "s" }
            ),
            NoInterval::OneOrder => format!(
                "no interval: every paired round ran the arms in the same order; the interval needs rounds of both \
                 orders, at least {MIN_ROUNDS} in all"
            ),
            NoInterval::BadValue => {
                "no interval: a round's median is zero or not a number".to_string()
            }
        }
    }
}

/// The crossover interval of the ratio arm / reference from paired rounds (see the module
/// documentation), at [`CONFIDENCE_LEVEL`].
///
/// # Errors
/// [`NoInterval`] with fewer than [`MIN_ROUNDS`] pairs, pairs of one run order only, or a
/// median that is not positive and finite.
pub fn paired_ratio(pairs: &[RoundPair]) -> Result<Paired, NoInterval> {
    if pairs.len() < MIN_ROUNDS {
        return Err(NoInterval::TooFewRounds {
            paired: pairs.len(),
        });
    }
    let mut groups: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    for p in pairs {
        let ok = |v: f64| v.is_finite() && v > 0.0;
        if !ok(p.arm) || !ok(p.reference) {
            return Err(NoInterval::BadValue);
        }
        groups[usize::from(reversed(p.round))].push((p.arm / p.reference).ln());
    }
    if groups.iter().any(Vec::is_empty) {
        return Err(NoInterval::OneOrder);
    }
    let mean = |g: &[f64]| g.iter().sum::<f64>() / g.len() as f64;
    let (m0, m1) = (mean(&groups[0]), mean(&groups[1]));
    let squares: f64 = groups[0]
        .iter()
        .map(|d| (d - m0).powi(2))
        .chain(groups[1].iter().map(|d| (d - m1).powi(2)))
        .sum();
    let n = pairs.len();
    let df = n - 2;
    let sd_log = (squares / df as f64).sqrt();
    let (n0, n1) = (groups[0].len() as f64, groups[1].len() as f64);
    let se = sd_log / 2.0 * (1.0 / n0 + 1.0 / n1).sqrt();
    let center_log = (m0 + m1) / 2.0;
    let reach = t_quantile(CONFIDENCE_LEVEL, df) * se;
    Ok(Paired {
        interval: Interval {
            level: CONFIDENCE_LEVEL,
            low: (center_log - reach).exp(),
            high: (center_log + reach).exp(),
        },
        center: center_log.exp(),
        half_width: reach.exp() - 1.0,
        rounds: n,
        df,
        sd_log,
        rounds_for_noise_band: rounds_for_half_width(sd_log, NOISE),
    })
}

/// The smallest round count `n ≥ MIN_ROUNDS` whose crossover interval, with bench's run
/// orders ([`reversed`]), has a half-width within `target` (a fraction) when one round's log
/// ratio varies with standard deviation `sd_log`:
/// `t(n − 2) × sd_log / 2 × √(1/n_forward + 1/n_reversed) ≤ ln(1 + target)`. `None` above
/// [`MAX_ROUNDS_ESTIMATE`].
pub fn rounds_for_half_width(sd_log: f64, target: f64) -> Option<usize> {
    let limit = (1.0 + target).ln();
    let reach = |n: usize| {
        // Rounds 1, 2 forward, 3, 4 reversed, ...: per 4 rounds, 2 of each.
        let forward = n / 4 * 2 + (n % 4).min(2);
        let reversed = n - forward;
        let spread = (1.0 / forward as f64 + 1.0 / reversed as f64).sqrt() / 2.0;
        t_quantile(CONFIDENCE_LEVEL, n - 2) * sd_log * spread
    };
    // t(n − 2) exceeds the normal quantile z and the orders' spread is at least 1/√n, so n is
    // at least (z × sd_log / limit)²; from there a few steps find it.
    let z = normal_quantile(CONFIDENCE_LEVEL);
    let floor = (z * sd_log / limit).powi(2).ceil();
    if !floor.is_finite() || floor > MAX_ROUNDS_ESTIMATE as f64 {
        return None;
    }
    let mut n = (floor as usize).max(MIN_ROUNDS);
    while reach(n) > limit {
        n += 1;
        if n > MAX_ROUNDS_ESTIMATE {
            return None;
        }
    }
    Some(n)
}

/// The two-sided standard normal quantile: the `z` with `P(|Z| ≤ z) = level` (1.95996 for
/// 0.95), by bisection on the everywhere-convergent series
/// `P(|Z| ≤ x) = 2 φ(x) (x + x³/3 + x⁵/(3·5) + …)`.
pub fn normal_quantile(level: f64) -> f64 {
    let cdf = |x: f64| {
        let (mut term, mut sum, mut k) = (x, x, 1.0);
        while term > 1e-17 * sum {
            k += 2.0;
            term *= x * x / k;
            sum += term;
        }
        2.0 * sum * (-x * x / 2.0).exp() / (2.0 * std::f64::consts::PI).sqrt()
    };
    bisect(level, cdf)
}

/// The `x ≥ 0` with `cdf(x) = level`, for an increasing `cdf` from 0; to about 1e-12.
fn bisect(level: f64, cdf: impl Fn(f64) -> f64) -> f64 {
    assert!(level > 0.0 && level < 1.0, "level {level} is not in (0, 1)");
    let mut hi = 4.0;
    while cdf(hi) < level {
        hi *= 2.0;
    }
    let mut lo = 0.0;
    while hi - lo > 1e-12 * hi {
        let mid = (lo + hi) / 2.0;
        if cdf(mid) < level {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (lo + hi) / 2.0
}

/// `P(|T| ≤ t)` for Student's t with `df ≥ 1` degrees of freedom, by the finite series of
/// Abramowitz & Stegun 26.7.3 (odd `df`) and 26.7.4 (even `df`), with `θ = atan(t / √df)`.
pub fn t_two_sided_cdf(t: f64, df: usize) -> f64 {
    assert!(df >= 1, "Student's t needs at least one degree of freedom");
    let theta = (t.abs() / (df as f64).sqrt()).atan();
    let (s, c) = theta.sin_cos();
    let c2 = c * c;
    let mut term = 1.0;
    let mut sum = 1.0;
    if df % 2 == 1 {
        if df == 1 {
            return theta * std::f64::consts::FRAC_2_PI;
        }
        for k in 1..=(df - 3) / 2 {
            term *= (2 * k) as f64 / (2 * k + 1) as f64 * c2;
            sum += term;
        }
        std::f64::consts::FRAC_2_PI * (theta + s * c * sum)
    } else {
        for k in 1..=(df - 2) / 2 {
            term *= (2 * k - 1) as f64 / (2 * k) as f64 * c2;
            sum += term;
        }
        s * sum
    }
}

/// The two-sided Student t quantile: the `t` with `P(|T| ≤ t) = level` for `df ≥ 1` degrees
/// of freedom (`level` in (0, 1)); e.g. 12.706 for 0.95 and 1 df, 2.262 for 9 df. Exact
/// (bisection on [`t_two_sided_cdf`]) up to 100 df; above, the Cornish–Fisher expansion in
/// `1/df` around the normal quantile (Abramowitz & Stegun 26.7.5), within 1e-7 there.
pub fn t_quantile(level: f64, df: usize) -> f64 {
    if df <= 100 {
        return bisect(level, |t| t_two_sided_cdf(t, df));
    }
    let z = normal_quantile(level);
    let v = df as f64;
    let z2 = z * z;
    let g1 = (z2 + 1.0) * z / 4.0;
    let g2 = ((5.0 * z2 + 16.0) * z2 + 3.0) * z / 96.0;
    let g3 = (((3.0 * z2 + 19.0) * z2 + 17.0) * z2 - 15.0) * z / 384.0;
    let g4 = ((((79.0 * z2 + 776.0) * z2 + 1482.0) * z2 - 1920.0) * z2 - 945.0) * z / 92160.0;
    z + g1 / v + g2 / (v * v) + g3 / v.powi(3) + g4 / v.powi(4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_quantiles_match_published_tables() {
        // Two-sided 95% (one-sided 0.975) and 99% quantiles, from standard t tables.
        for (df, q95, q99) in [
            (1, 12.7062, 63.6567),
            (2, 4.3027, 9.9248),
            (3, 3.1824, 5.8409),
            (4, 2.7764, 4.6041),
            (8, 2.3060, 3.3554),
            (9, 2.2622, 3.2498),
            (30, 2.0423, 2.7500),
            (120, 1.9799, 2.6174),
        ] {
            let t = t_quantile(0.95, df);
            assert!((t - q95).abs() < 5e-4, "df {df}: {t} vs {q95}");
            let t = t_quantile(0.99, df);
            assert!((t - q99).abs() < 5e-4, "df {df}: {t} vs {q99}");
        }
        // Towards the normal: 1.959964 at large df; the expansion meets the exact value.
        assert!((normal_quantile(0.95) - 1.959_964).abs() < 1e-6);
        assert!((normal_quantile(0.99) - 2.575_829).abs() < 1e-6);
        assert!((t_quantile(0.95, 20_000) - 1.960_083).abs() < 2e-6);
        for df in [101, 150, 400] {
            let exact = bisect(0.95, |t| t_two_sided_cdf(t, df));
            assert!((t_quantile(0.95, df) - exact).abs() < 1e-7, "df {df}");
        }
        // Closed forms: df 1 is Cauchy, df 2 is t/sqrt(t²+2).
        assert!((t_two_sided_cdf(1.0, 1) - 0.5).abs() < 1e-12);
        assert!((t_two_sided_cdf(2.0, 2) - 2.0 / 6f64.sqrt()).abs() < 1e-12);
    }

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
    fn the_interval_is_the_crossover_t_interval() {
        // Forward rounds (1, 2, 5, 6) and reversed ones (3, 4, 7, 8); by hand.
        let ratios = [1.10, 1.06, 0.98, 1.00, 1.08, 1.04, 0.96, 0.97];
        let p = paired_ratio(&pairs(&ratios)).unwrap();
        let logs: Vec<f64> = ratios.iter().map(|r: &f64| r.ln()).collect();
        let odd = [logs[0], logs[1], logs[4], logs[5]];
        let even = [logs[2], logs[3], logs[6], logs[7]];
        let mean = |g: &[f64]| g.iter().sum::<f64>() / g.len() as f64;
        let ss = |g: &[f64]| g.iter().map(|d| (d - mean(g)).powi(2)).sum::<f64>();
        let sd = ((ss(&odd) + ss(&even)) / 6.0).sqrt();
        let se = sd / 2.0 * (2.0f64 / 4.0).sqrt();
        let center = (mean(&odd) + mean(&even)) / 2.0;
        let t = 2.4469; // 6 df
        assert_eq!((p.rounds, p.df), (8, 6));
        assert!((p.sd_log - sd).abs() < 1e-12);
        assert!((p.center - center.exp()).abs() < 1e-12);
        assert!((p.interval.low - (center - t * se).exp()).abs() < 1e-4);
        assert!((p.interval.high - (center + t * se).exp()).abs() < 1e-4);
        assert!((p.half_width - ((t * se).exp() - 1.0)).abs() < 1e-4);
        assert_eq!(p.interval.level, CONFIDENCE_LEVEL);
        // A period effect (+5% in forward rounds, −5% in reversed ones) is not noise: it cancels.
        let p = paired_ratio(&pairs(&[1.05, 1.05, 0.95, 0.95, 1.05, 1.05])).unwrap();
        assert!(p.sd_log < 1e-12 && (p.center - (1.05f64 * 0.95).sqrt()).abs() < 1e-12);
    }

    #[test]
    fn too_few_rounds_give_no_interval_and_say_how_many_are_needed() {
        for n in 0..MIN_ROUNDS {
            let err = paired_ratio(&pairs(&vec![1.0; n])).unwrap_err();
            assert_eq!(err, NoInterval::TooFewRounds { paired: n });
            let text = err.text();
            assert!(text.contains(&format!("at least {MIN_ROUNDS}")), "{text}");
            assert!(text.contains("--rounds 4"), "{text}");
        }
        assert!(paired_ratio(&pairs(&[1.0; MIN_ROUNDS])).is_ok());
        // Only forward rounds (1, 2, 5, 6, 9, 10): one order.
        let odd: Vec<RoundPair> = [1, 2, 5, 6, 9, 10]
            .into_iter()
            .map(|round| RoundPair {
                round,
                arm: 10.0,
                reference: 10.0,
            })
            .collect();
        assert_eq!(paired_ratio(&odd), Err(NoInterval::OneOrder));
        let mut bad = pairs(&[1.0; 6]);
        bad[2].reference = 0.0;
        assert_eq!(paired_ratio(&bad), Err(NoInterval::BadValue));
    }

    #[test]
    fn rounds_reverse_in_pairs() {
        let orders: String = (1..=10)
            .map(|r| if reversed(r) { 'R' } else { 'F' })
            .collect();
        assert_eq!(orders, "FFRRFFRRFF");
        assert!(!reversed(0));
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
    fn rounds_needed_bring_the_half_width_into_the_band() {
        // n rounds of bench's orders whose log ratios spread by exactly `sd` within each order.
        let rounds_with = |n: usize, sd: f64| -> Vec<RoundPair> {
            let order = |r: u32| usize::from(reversed(r));
            let sizes = [0, 1].map(|o| (1..=n as u32).filter(|r| order(*r) == o).count());
            let mut seen = [0usize; 2];
            let deviations: Vec<f64> = (1..=n as u32)
                .map(|r| {
                    let o = order(r);
                    seen[o] += 1;
                    (seen[o] - 1) as f64 - (sizes[o] - 1) as f64 / 2.0
                })
                .collect();
            let squares: f64 = deviations.iter().map(|e| e * e).sum();
            let scale = if squares > 0.0 {
                sd * ((n - 2) as f64 / squares).sqrt()
            } else {
                0.0
            };
            deviations
                .iter()
                .enumerate()
                .map(|(i, e)| RoundPair {
                    round: i as u32 + 1,
                    arm: 100.0 * (e * scale).exp(),
                    reference: 100.0,
                })
                .collect()
        };
        for sd in [0.0, 0.005, 0.02, 0.05, 0.2] {
            let n = rounds_for_half_width(sd, NOISE).unwrap();
            assert!(n >= MIN_ROUNDS);
            let at = |n: usize| paired_ratio(&rounds_with(n, sd)).unwrap();
            assert!((at(n).sd_log - sd).abs() < 1e-12);
            assert!(at(n).half_width <= NOISE + 1e-12, "{sd}: {n}");
            if n > MIN_ROUNDS {
                assert!(
                    at(n - 1).half_width > NOISE,
                    "{sd}: {n} is not the smallest"
                );
            }
        }
        // 5% per round: about (1.96 × 0.05 / ln 1.02)² ≈ 25 rounds.
        assert_eq!(rounds_for_half_width(0.05, NOISE), Some(28));
        assert_eq!(rounds_for_half_width(10.0, NOISE), None);
    }
}
