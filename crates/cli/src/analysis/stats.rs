//! Descriptive statistics over `samples_ts`: median, range, coefficient of variation and round
//! drift. The speedup's interval is in [`super::interval`].

/// The coefficient of variation above which an arm's samples are flagged (5%).
pub const CV_WARNING: f64 = 0.05;
/// The spread of round medians, relative to the overall median, above which rounds are flagged
/// as drifting apart (5%).
pub const DRIFT_WARNING: f64 = 0.05;

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
        // Halved first: the same number as (a + b) / 2 (halving is exact), without the sum
        // overflowing to infinity for values near f64's largest.
        sorted[n / 2 - 1] / 2.0 + sorted[n / 2] / 2.0
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
    // The ratio does not change with the values' scale: values so large that their sum or
    // squares overflow are scaled down by the largest first.
    let largest = values.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let scale = if values.iter().sum::<f64>().is_finite() && (largest * largest).is_finite() {
        1.0
    } else {
        largest
    };
    let mean = values.iter().map(|v| v / scale).sum::<f64>() / n;
    let var = values
        .iter()
        .map(|v| (v / scale - mean).powi(2))
        .sum::<f64>()
        / (n - 1.0);
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn values_near_the_largest_float_have_a_finite_median_and_spread() {
        assert_eq!(median(&[1e308, 1e308]), Some(1e308));
        assert_eq!(median(&[1.5e308, 1.7e308]), Some(1.6e308));
        let cv = coefficient_of_variation(&[1e308, 1e308, 1e308]).unwrap();
        assert_eq!(cv, 0.0);
        let cv = coefficient_of_variation(&[1e308, 1.2e308]).unwrap();
        assert!(
            (cv - coefficient_of_variation(&[1.0, 1.2]).unwrap()).abs() < 1e-12,
            "{cv}"
        );
        assert_eq!(median(&[1e-300, 3e-300]), Some(2e-300));
    }

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

    proptest! {
        #[test]
        fn median_lies_within_the_range(values in proptest::collection::vec(0.1f64..1e6, 1..40)) {
            let m = median(&values).unwrap();
            let (lo, hi) = range(&values).unwrap();
            prop_assert!(lo <= m && m <= hi);
        }

    }
}
