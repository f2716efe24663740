//! Statistics over `samples_ts`: median, range, coefficient of variation, round drift and a
//! bootstrap confidence interval of a ratio of medians, with a fixed-seed generator so that the
//! same samples always give the same interval.

/// The coefficient of variation above which an arm's samples are flagged (5%).
pub const CV_WARNING: f64 = 0.05;
/// The spread of round medians, relative to the overall median, above which rounds are flagged
/// as drifting apart (5%).
pub const DRIFT_WARNING: f64 = 0.05;
/// Bootstrap resamples per confidence interval.
pub const BOOTSTRAP_RESAMPLES: usize = 10_000;
/// The bootstrap generator's fixed seed.
pub const BOOTSTRAP_SEED: u64 = 0xca95_11b0_0075;

/// Median of `values` (the mean of the two middle values for an even count); `None` when empty.
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    Some(median_of_sorted(&sorted))
}

fn median_of_sorted(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

/// Smallest and largest value; `None` when empty.
pub fn range(values: &[f64]) -> Option<(f64, f64)> {
    let min = values.iter().copied().min_by(f64::total_cmp)?;
    let max = values.iter().copied().max_by(f64::total_cmp)?;
    Some((min, max))
}

/// Sample standard deviation (n − 1) divided by the mean; `None` for fewer than two values.
pub fn coefficient_of_variation(values: &[f64]) -> Option<f64> {
    if values.len() < 2 {
        return None;
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    Some(var.sqrt() / mean)
}

/// (largest − smallest round median) / median of all samples; `None` with fewer than two rounds.
pub fn round_drift(round_medians: &[f64], overall_median: f64) -> Option<f64> {
    if round_medians.len() < 2 {
        return None;
    }
    let (lo, hi) = range(round_medians)?;
    Some((hi - lo) / overall_median)
}

/// SplitMix64: a small, fast generator whose whole state is one `u64`; good enough to draw
/// bootstrap indices, and reproducible from its seed.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator starting at `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A uniform index in `0..n` (multiply-shift; the bias is below 2^-32 for any slice length).
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }
}

/// A two-sided confidence interval.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Interval {
    /// Lower bound.
    pub low: f64,
    /// Upper bound.
    pub high: f64,
}

impl Interval {
    /// Whether `value` lies within the interval, bounds included.
    #[cfg(test)]
    pub fn contains(&self, value: f64) -> bool {
        self.low <= value && value <= self.high
    }
}

/// 95% percentile-bootstrap interval of median(numerator) / median(denominator).
///
/// Each side is a list of groups of samples, one group per llama-bench process (round):
/// samples of one process share its conditions (placement, clock, neighbours), so they are
/// not independent. Each resample therefore draws the groups with replacement, then samples
/// within each drawn group with replacement (a two-level bootstrap); with a single group this is
/// the ordinary bootstrap of the samples. [`BOOTSTRAP_RESAMPLES`] resamples from a generator
/// seeded with [`BOOTSTRAP_SEED`]. `None` when either side has no samples.
pub fn bootstrap_ratio_ci(numerator: &[&[f64]], denominator: &[&[f64]]) -> Option<Interval> {
    let clean = |groups: &[&[f64]]| -> Vec<Vec<f64>> {
        groups
            .iter()
            .filter(|g| !g.is_empty())
            .map(|g| g.to_vec())
            .collect()
    };
    let (num, den) = (clean(numerator), clean(denominator));
    if num.is_empty() || den.is_empty() {
        return None;
    }
    let mut rng = SplitMix64::new(BOOTSTRAP_SEED);
    let mut pool = Vec::new();
    let mut resample_median = |groups: &[Vec<f64>], rng: &mut SplitMix64| {
        pool.clear();
        for _ in 0..groups.len() {
            let group = &groups[rng.below(groups.len())];
            for _ in 0..group.len() {
                pool.push(group[rng.below(group.len())]);
            }
        }
        pool.sort_by(f64::total_cmp);
        median_of_sorted(&pool)
    };
    let mut ratios = Vec::with_capacity(BOOTSTRAP_RESAMPLES);
    for _ in 0..BOOTSTRAP_RESAMPLES {
        let a = resample_median(&num, &mut rng);
        let b = resample_median(&den, &mut rng);
        ratios.push(a / b);
    }
    ratios.sort_by(f64::total_cmp);
    let at =
        |q: f64| ratios[((q * (ratios.len() - 1) as f64).round() as usize).min(ratios.len() - 1)];
    Some(Interval {
        low: at(0.025),
        high: at(0.975),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn medians_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[7.5]), Some(7.5));
        assert_eq!(median(&[]), None);
        assert_eq!(range(&[2.0, 9.0, -1.0]), Some((-1.0, 9.0)));
        assert_eq!(range(&[]), None);
    }

    #[test]
    fn coefficient_of_variation_and_drift() {
        assert_eq!(coefficient_of_variation(&[5.0]), None);
        assert_eq!(coefficient_of_variation(&[5.0, 5.0, 5.0]), Some(0.0));
        // mean 10, sample sd sqrt(2) -> cv 0.1414
        let cv = coefficient_of_variation(&[9.0, 10.0, 11.0, 8.0, 12.0]).unwrap();
        assert!((cv - (2.5f64).sqrt() / 10.0).abs() < 1e-12, "{cv}");
        assert_eq!(round_drift(&[100.0], 100.0), None);
        assert_eq!(
            round_drift(&[100.0, 110.0, 104.0], 104.0),
            Some(10.0 / 104.0)
        );
    }

    #[test]
    fn generator_is_reproducible_and_in_range() {
        let mut a = SplitMix64::new(1);
        let mut b = SplitMix64::new(1);
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        // SplitMix64's published first output for seed 0.
        assert_eq!(SplitMix64::new(0).next_u64(), 0xe220_a839_7b1d_cdaf);
        let mut r = SplitMix64::new(7);
        let mut seen = [0usize; 3];
        for _ in 0..3000 {
            seen[r.below(3)] += 1;
        }
        assert!(seen.iter().all(|&n| n > 900), "{seen:?}");
    }

    #[test]
    fn bootstrap_interval_brackets_the_ratio() {
        let stock = [10.0, 10.5, 9.5, 10.2, 9.8];
        let unlocked = [100.0, 101.0, 99.0, 100.5, 99.5];
        let ci = bootstrap_ratio_ci(&[&unlocked], &[&stock]).unwrap();
        assert!(ci.contains(100.0 / 10.0), "{ci:?}");
        assert!(ci.low > 9.0 && ci.high < 11.0, "{ci:?}");
        // Same samples, same interval.
        assert_eq!(bootstrap_ratio_ci(&[&unlocked], &[&stock]), Some(ci));
        // A/A: identical sets contain 1.
        assert!(
            bootstrap_ratio_ci(&[&stock], &[&stock])
                .unwrap()
                .contains(1.0)
        );
        assert_eq!(bootstrap_ratio_ci(&[], &[&stock]), None);
        assert_eq!(bootstrap_ratio_ci(&[&[]], &[&stock]), None);
        let one = bootstrap_ratio_ci(&[&[4.0]], &[&[2.0]]).unwrap();
        assert_eq!((one.low, one.high), (2.0, 2.0));
    }

    #[test]
    fn rounds_that_disagree_widen_the_interval() {
        // Two processes per arm, each tight, but the processes differ by 10%: the pooled
        // bootstrap would call the arms different; resampling processes does not.
        let stock_r1 = [100.0, 100.5, 99.5, 100.2, 99.8];
        let stock_r2 = [110.0, 110.5, 109.5, 110.2, 109.8];
        let again_r1 = [104.0, 104.5, 103.5, 104.2, 103.8];
        let again_r2 = [114.0, 114.5, 113.5, 114.2, 113.8];
        let pooled_s: Vec<f64> = stock_r1.iter().chain(&stock_r2).copied().collect();
        let pooled_a: Vec<f64> = again_r1.iter().chain(&again_r2).copied().collect();
        let pooled = bootstrap_ratio_ci(&[&pooled_a], &[&pooled_s]).unwrap();
        let grouped = bootstrap_ratio_ci(&[&again_r1, &again_r2], &[&stock_r1, &stock_r2]).unwrap();
        assert!(
            grouped.low < pooled.low && grouped.high > pooled.high,
            "{grouped:?} {pooled:?}"
        );
        assert!(grouped.contains(1.0), "{grouped:?}");
    }

    proptest! {
        #[test]
        fn median_lies_within_the_range(values in proptest::collection::vec(0.1f64..1e6, 1..40)) {
            let m = median(&values).unwrap();
            let (lo, hi) = range(&values).unwrap();
            prop_assert!(lo <= m && m <= hi);
        }

        #[test]
        fn interval_lies_within_extreme_ratios(
            a in proptest::collection::vec(1.0f64..1e4, 1..12),
            b in proptest::collection::vec(1.0f64..1e4, 1..12),
        ) {
            let ci = bootstrap_ratio_ci(&[&a], &[&b]).unwrap();
            let (alo, ahi) = range(&a).unwrap();
            let (blo, bhi) = range(&b).unwrap();
            prop_assert!(ci.low <= ci.high);
            prop_assert!(ci.low >= alo / bhi - 1e-9 && ci.high <= ahi / blo + 1e-9);
        }
    }
}
