//! A candidate's figure in one round: how much faster or slower it ran than the reference in
//! the same round, as the natural log of the ratio of their throughputs (what the search
//! records, [`super::search::Halving::record`]).
//!
//! Each llama-bench process gives one median throughput per test (pp512, tg128...: the median
//! of its repetitions' `samples_ts`, as bench reads a process). A round's figure is the mean,
//! over the tests both processes ran, of ln(candidate median / reference median): the log of
//! the geometric mean of the per-test ratios, so prompt processing and generation count alike
//! whatever their scale in tokens/s. `-p 0` or `-n 0` leaves a test out, to tune for one alone.

use crate::llama::{BenchRow, TestKey};

/// The median of `values` (the mean of the two middle ones for an even count); `None` when
/// empty or when one is not a finite positive throughput.
fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() || values.iter().any(|v| !v.is_finite() || *v <= 0.0) {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    Some(if sorted.len() % 2 == 0 {
        // Halved first, so that values near f64's largest do not overflow.
        sorted[mid - 1] / 2.0 + sorted[mid] / 2.0
    } else {
        sorted[mid]
    })
}

/// Each test's median throughput in one process's results, in the order first seen; a test
/// given twice (a sweep bench would refuse) takes its first rows' samples only.
pub fn medians(rows: &[BenchRow]) -> Vec<(TestKey, f64)> {
    let mut out: Vec<(TestKey, f64)> = Vec::new();
    for row in rows {
        if out.iter().any(|(k, _)| *k == row.key) {
            continue;
        }
        if let Some(m) = median(&row.samples_ts) {
            out.push((row.key, m));
        }
    }
    out
}

/// The figure of a candidate process against the reference process of the same round: the
/// mean over the tests both have of ln(candidate / reference median throughput); `None` when
/// they share no test.
pub fn log_ratio(reference: &[(TestKey, f64)], candidate: &[(TestKey, f64)]) -> Option<f64> {
    let logs: Vec<f64> = reference
        .iter()
        .filter_map(|(key, r)| {
            let c = candidate.iter().find(|(k, _)| k == key)?.1;
            Some((c / r).ln())
        })
        .collect();
    (!logs.is_empty()).then(|| logs.iter().sum::<f64>() / logs.len() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n_prompt: u64, n_gen: u64) -> TestKey {
        TestKey {
            n_prompt,
            n_gen,
            n_depth: 0,
            quantity: Default::default(),
        }
    }

    #[test]
    fn the_figure_is_the_log_of_the_geometric_mean_of_the_tests_ratios() {
        let reference = [(key(512, 0), 1000.0), (key(0, 128), 100.0)];
        // pp 1.2x faster, tg 1.0x: the geometric mean is sqrt(1.2).
        let candidate = [(key(0, 128), 100.0), (key(512, 0), 1200.0)];
        let figure = log_ratio(&reference, &candidate).unwrap();
        assert!((figure - 1.2f64.sqrt().ln()).abs() < 1e-12, "{figure}");
        // Only the tests both ran count.
        let tg_only = [(key(0, 128), 50.0)];
        let figure = log_ratio(&reference, &tg_only).unwrap();
        assert!((figure - 0.5f64.ln()).abs() < 1e-12, "{figure}");
        assert_eq!(log_ratio(&reference, &[(key(64, 0), 1.0)]), None);
    }

    #[test]
    fn a_process_median_is_per_test_and_refuses_what_is_no_throughput() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[1.0, 0.0]), None);
        assert_eq!(median(&[1.0, f64::NAN]), None);
    }
}
