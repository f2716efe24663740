//! Percent of host (schema 6): a guest arm's speed against the bare-metal host's, from the
//! arm's llama-bench processes (its per-round medians) and the host's processes (each host
//! file's median: `bench --baseline` repeated, a host bench bundle's `stock` arm, or
//! `report --arm host=A.json,B.json`).
//!
//! With [`MIN_HOST_PROCESSES`] or more host processes: the two-sample Hodges–Lehmann estimate
//! of the log ratio (the median of every difference `ln guest_i − ln host_j`) and the
//! Mann–Whitney (Wilcoxon rank-sum) interval around it, `[D(k), D(nm + 1 − k)]` of the `n·m`
//! sorted differences, `k` the critical count of the rank-sum statistic `U` at
//! [`CONFIDENCE_LEVEL`]. The interval is distribution-free: its level holds exactly when each
//! side's processes are independent draws and the two sides' distributions of log medians
//! differ only by a shift (the same scatter, whatever its shape). `U`'s null distribution is
//! computed exactly up to [`EXACT_UP_TO`] pairs, and from its normal approximation beyond.
//! It is not a randomized comparison: the guest and the host ran at different times on
//! different machines, so the interval covers the scatter from one process to the next, not
//! a drift between the two sessions (a host session that ran on a warmer day, an OS update).
//!
//! With one host process there is no scatter of the host to measure: percent of host is the
//! ratio of medians, rounded to what the guest arm's own round-to-round spread supports (a
//! single process is off by about that much), and marked as a single host process.

use serde::Serialize;

use super::interval::{CONFIDENCE_LEVEL, Interval};
use super::ranks::{normal_quantile, normal_upper_tail};

/// The fewest host processes percent of host gets an interval from. The Mann–Whitney interval
/// exists when the most extreme arrangement of the two samples is rare enough:
/// `2 / C(n + m, m) ≤ 1 − level`, i.e. `C(n + m, m) ≥ 40` at 95%. One host process would need
/// 39 guest rounds, and would rest the whole interval on the guest's scatter standing for the
/// host's; two need 8 guest rounds, three need 5.
pub const MIN_HOST_PROCESSES: usize = 2;

/// The largest `n·m` (guest rounds × host processes) whose rank-sum distribution is computed
/// exactly; beyond, its normal approximation (with continuity correction) is used.
pub const EXACT_UP_TO: usize = 2500;

/// The method, in words, when the interval's critical count is exact.
const EXACT: &str = "two-sample Hodges-Lehmann estimate, exact Mann-Whitney interval";
/// The method, in words, when the critical count comes from the normal approximation.
const NORMAL: &str =
    "two-sample Hodges-Lehmann estimate, Mann-Whitney interval (normal approximation)";
/// The method, in words, with one host process.
const SINGLE: &str = "single host process: ratio of medians, rounded to the guest's spread";

/// How a percent of host was computed (`summary.json`'s `percent_of_host_basis`, schema 6).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HostBasis {
    /// The host's llama-bench processes with this test.
    pub host_processes: usize,
    /// The guest arm's processes (rounds) with this test.
    pub guest_processes: usize,
    /// The method, in words.
    pub method: &'static str,
    /// The interval's exact level (at least 0.95), or its normal approximation; `None`
    /// without an interval.
    pub coverage: Option<f64>,
    /// One host process: the percentage points `percent_of_host` is rounded to (a power of
    /// ten from 0.01 to 10), about one guest process's scatter. `None` otherwise.
    pub resolution: Option<f64>,
    /// Why there is no interval, and what would give one; `None` with one.
    pub no_interval: Option<String>,
}

/// Percent of host and how it was computed.
#[derive(Clone, Debug, PartialEq)]
pub struct HostPercent {
    /// Percent of host: the two-sample estimate (several host processes), or the ratio of
    /// medians rounded to [`HostBasis::resolution`] (one).
    pub percent: f64,
    /// The interval, in percent (`level` 0.95), when there is one.
    pub ci95: Option<Interval>,
    /// How.
    pub basis: HostBasis,
}

/// `P(U ≤ u)` for `u = 0 ..= n·m`, where `U` is the Mann–Whitney count of pairs with the first
/// sample's value above the second's, for samples of `n` and `m` continuous values of one
/// distribution. By the recursion over the largest value (in the first sample with
/// probability `n / (n + m)`, then it exceeds all `m` of the second), on probabilities, so
/// that every step adds non-negative terms.
pub fn rank_sum_cdf(n: usize, m: usize) -> Vec<f64> {
    // row[b] = the distribution for (a, b), for the current a.
    let mut row: Vec<Vec<f64>> = vec![vec![1.0]; m + 1];
    for a in 1..=n {
        let mut next: Vec<Vec<f64>> = Vec::with_capacity(m + 1);
        next.push(vec![1.0]);
        for b in 1..=m {
            let (pa, pb) = (a as f64 / (a + b) as f64, b as f64 / (a + b) as f64);
            let mut p = vec![0.0; a * b + 1];
            // The largest in the first sample: it exceeds all b of the second.
            for (u, v) in row[b].iter().enumerate() {
                p[u + b] += pa * v;
            }
            for (u, v) in next[b - 1].iter().enumerate() {
                p[u] += pb * v;
            }
            next.push(p);
        }
        row = next;
    }
    let mut cdf = row.pop().expect("m + 1 entries");
    for u in 1..cdf.len() {
        cdf[u] += cdf[u - 1];
    }
    cdf
}

/// The critical count `k ≥ 1` of the Mann–Whitney interval `[D(k), D(nm + 1 − k)]` at `level`
/// or the nearest level above, its coverage `1 − 2·P(U ≤ k − 1)`, and whether both are exact
/// (`n·m ≤` [`EXACT_UP_TO`]) or from the normal approximation. `None` when no arrangement of
/// the samples is rare enough (too few processes on either side).
pub fn rank_sum_critical(n: usize, m: usize, level: f64) -> Option<(usize, f64, bool)> {
    let alpha = 1.0 - level;
    if n == 0 || m == 0 {
        return None;
    }
    if n * m <= EXACT_UP_TO {
        let cdf = rank_sum_cdf(n, m);
        // The largest k with P(U ≤ k − 1) ≤ α/2 (a hair of slack for rounding).
        let k = cdf
            .iter()
            .take_while(|p| **p <= alpha / 2.0 + 1e-12)
            .count();
        return (k >= 1).then(|| (k, 1.0 - 2.0 * cdf[k - 1], true));
    }
    let (nm, sigma) = ((n * m) as f64, ((n * m * (n + m + 1)) as f64 / 12.0).sqrt());
    let tail = |k: usize| normal_upper_tail((nm / 2.0 - (k as f64 - 1.0) - 0.5) / sigma);
    let mut k = (nm / 2.0 - normal_quantile(level) * sigma).floor().max(0.0) as usize;
    while k >= 1 && tail(k) > alpha / 2.0 {
        k -= 1;
    }
    while tail(k + 1) <= alpha / 2.0 {
        k += 1;
    }
    (k >= 1).then(|| (k, 1.0 - 2.0 * tail(k), false))
}

/// The two-sample comparison of log values `guest` (`n`) and `host` (`m`): the Hodges–Lehmann
/// estimate of the shift `guest − host` (median of the `n·m` differences) and, when
/// [`rank_sum_critical`] gives a count, the interval at `level` with its coverage and whether
/// it is exact.
pub fn two_sample(guest: &[f64], host: &[f64], level: f64) -> (f64, Option<(f64, f64, f64, bool)>) {
    let mut d: Vec<f64> = guest
        .iter()
        .flat_map(|g| host.iter().map(move |h| g - h))
        .collect();
    d.sort_by(f64::total_cmp);
    let len = d.len();
    let estimate = if len % 2 == 1 {
        d[len / 2]
    } else {
        (d[len / 2 - 1] + d[len / 2]) / 2.0
    };
    let interval = rank_sum_critical(guest.len(), host.len(), level)
        .map(|(k, coverage, exact)| (d[k - 1], d[len - k], coverage, exact));
    (estimate, interval)
}

/// The percentage points a single host process's percent of host is rounded to: one guest
/// process's scatter (the standard deviation of the log round medians, times `percent`),
/// down to a power of ten between 0.01 and 10; 1 when the guest has fewer than 2 rounds (no
/// spread to go by).
pub fn resolution(percent: f64, guest_logs: &[f64]) -> f64 {
    let n = guest_logs.len();
    if n < 2 {
        return 1.0;
    }
    let mean = guest_logs.iter().sum::<f64>() / n as f64;
    let sd = (guest_logs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt();
    let points = percent * sd;
    if !(points.is_finite() && points > 0.0) {
        return 0.01;
    }
    10f64.powf(points.log10().floor()).clamp(0.01, 10.0)
}

/// `value` rounded to a multiple of `resolution` (a power of ten), without binary dust.
pub fn round_to(value: f64, resolution: f64) -> f64 {
    let digits = (-resolution.log10().round()).max(0.0) as i32;
    let scaled = (value / resolution).round() * resolution;
    let factor = 10f64.powi(digits);
    (scaled * factor).round() / factor
}

/// Percent of host from the guest arm's round medians and the host's process medians (tokens/s,
/// all positive and finite), and the pooled medians (the ratio of medians a single host process
/// gives). `None` without values to compare.
pub fn percent_of_host(
    guest_rounds: &[f64],
    host_processes: &[f64],
    guest_median: f64,
    host_median: f64,
) -> Option<HostPercent> {
    let ok = |v: &f64| v.is_finite() && *v > 0.0;
    if guest_rounds.is_empty()
        || host_processes.is_empty()
        || !guest_rounds.iter().chain(host_processes).all(ok)
    {
        return None;
    }
    let guest: Vec<f64> = guest_rounds.iter().map(|v| v.ln()).collect();
    let host: Vec<f64> = host_processes.iter().map(|v| v.ln()).collect();
    let (n, m) = (guest.len(), host.len());
    if m < MIN_HOST_PROCESSES {
        let raw = 100.0 * guest_median / host_median;
        let resolution = resolution(raw, &guest);
        return Some(HostPercent {
            percent: round_to(raw, resolution),
            ci95: None,
            basis: HostBasis {
                host_processes: m,
                guest_processes: n,
                method: SINGLE,
                coverage: None,
                resolution: Some(resolution),
                no_interval: Some(format!(
                    "no interval: a single host process, whose own scatter is unknown; give at \
                     least {MIN_HOST_PROCESSES} (capshim bench --baseline FILE repeated, one file \
                     per llama-bench process on the host, or a bench bundle made on the host)"
                )),
            },
        });
    }
    let (estimate, interval) = two_sample(&guest, &host, CONFIDENCE_LEVEL);
    let no_interval = interval.is_none().then(|| {
        let needed = (1..=1000)
            .find(|&r| rank_sum_critical(r, m, CONFIDENCE_LEVEL).is_some())
            .unwrap_or(1000);
        format!(
            "no interval: {n} guest round{} against {m} host processes; the {}% interval needs \
             at least {needed} rounds with {m} host processes, or more host processes",
            if n == 1 { "" } else { "s" },
            super::interval::percent_text(CONFIDENCE_LEVEL),
        )
    });
    Some(HostPercent {
        percent: 100.0 * estimate.exp(),
        ci95: interval.map(|(low, high, _, _)| Interval {
            level: CONFIDENCE_LEVEL,
            low: 100.0 * low.exp(),
            high: 100.0 * high.exp(),
        }),
        basis: HostBasis {
            host_processes: m,
            guest_processes: n,
            method: match interval {
                Some((_, _, _, false)) => NORMAL,
                _ => EXACT,
            },
            coverage: interval.map(|(_, _, c, _)| c),
            resolution: None,
            no_interval,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn choose(n: usize, k: usize) -> f64 {
        (0..k).fold(1.0, |acc, i| acc * (n - i) as f64 / (i + 1) as f64)
    }

    #[test]
    fn the_rank_sum_distribution_matches_enumeration() {
        // n = 3, m = 2: C(5, 2) = 10 arrangements; U counts are 0,0,1,1,2,2,2,3,3,4... by
        // enumeration: P(U = 0) = 1/10, P(U ≤ 1) = 2/10, P(U ≤ 2) = 4/10.
        let cdf = rank_sum_cdf(3, 2);
        assert_eq!(cdf.len(), 7);
        for (u, want) in [(0, 0.1), (1, 0.2), (2, 0.4), (3, 0.6), (6, 1.0)] {
            assert!((cdf[u] - want).abs() < 1e-12, "P(U ≤ {u}) = {}", cdf[u]);
        }
        // Symmetric, and the extreme has probability 1 / C(n + m, m).
        let cdf = rank_sum_cdf(12, 5);
        assert!((cdf[0] - 1.0 / choose(17, 5)).abs() < 1e-15);
        let total = cdf.len() - 1;
        for u in 0..total {
            let p = cdf[u] - if u > 0 { cdf[u - 1] } else { 0.0 };
            let q = cdf[total - u] - cdf[total - u - 1];
            assert!((p - q).abs() < 1e-12);
        }
    }

    #[test]
    fn the_interval_needs_enough_arrangements() {
        // 2 host processes: C(9, 2) = 36 < 40 with 7 rounds, C(10, 2) = 45 with 8.
        assert_eq!(rank_sum_critical(7, 2, 0.95), None);
        let (k, coverage, exact) = rank_sum_critical(8, 2, 0.95).unwrap();
        assert_eq!(k, 1);
        assert!((coverage - (1.0 - 2.0 / 45.0)).abs() < 1e-12 && exact);
        assert_eq!(rank_sum_critical(4, 3, 0.95), None);
        assert!(rank_sum_critical(5, 3, 0.95).is_some());
        // One host process needs 39 rounds.
        assert_eq!(rank_sum_critical(38, 1, 0.95), None);
        assert!(rank_sum_critical(39, 1, 0.95).is_some());
        // Textbook value: n = m = 10 at 95% gives k = 24 (U's lower 2.5% point is 23).
        assert_eq!(rank_sum_critical(10, 10, 0.95).unwrap().0, 24);
    }

    #[test]
    fn the_normal_approximation_agrees_with_the_exact_count_where_both_apply() {
        let exact = rank_sum_critical(50, 50, 0.95).unwrap();
        assert!(exact.2);
        let approx = rank_sum_critical(51, 50, 0.95).unwrap();
        assert!(!approx.2);
        // k for 51 × 50 lies near k for 50 × 50 plus a few, and the coverage near 0.95.
        assert!(
            approx.0 >= exact.0 && approx.0 <= exact.0 + 40,
            "{approx:?} {exact:?}"
        );
        assert!((approx.1 - 0.95).abs() < 0.002, "{approx:?}");
    }

    #[test]
    fn the_estimate_is_the_median_of_the_differences() {
        let guest = [1.0f64, 2.0, 3.0];
        let host = [0.0f64, 1.0];
        // Differences: 1, 0, 2, 1, 3, 2 → sorted 0 1 1 2 2 3, median 1.5.
        let (estimate, interval) = two_sample(&guest, &host, 0.95);
        assert_eq!(estimate, 1.5);
        assert_eq!(interval, None);
    }

    #[test]
    fn several_host_processes_give_an_interval_around_the_estimate() {
        let guest: Vec<f64> = (0..12)
            .map(|i| 50.0 * (1.0 + 0.01 * (i % 5) as f64))
            .collect();
        let host: Vec<f64> = (0..4).map(|i| 100.0 * (1.0 + 0.01 * i as f64)).collect();
        let p = percent_of_host(&guest, &host, 51.0, 101.5).unwrap();
        let ci = p.ci95.unwrap();
        assert!(ci.low < p.percent && p.percent < ci.high, "{p:?}");
        assert!(ci.low > 45.0 && ci.high < 55.0, "{p:?}");
        assert_eq!(p.basis.host_processes, 4);
        assert_eq!(p.basis.method, EXACT);
        assert!(p.basis.coverage.unwrap() >= 0.95);
        assert_eq!(p.basis.no_interval, None);
        // Two host processes and 6 rounds: an estimate, no interval, and what would give one.
        let p = percent_of_host(&guest[..6], &host[..2], 51.0, 101.0).unwrap();
        assert_eq!(p.ci95, None);
        let why = p.basis.no_interval.unwrap();
        assert!(
            why.contains("needs at least 8 rounds with 2 host processes"),
            "{why}"
        );
    }

    #[test]
    fn one_host_process_is_rounded_to_the_guests_scatter_and_marked() {
        // Rounds scatter by about 3%: 50% of host is known to about 1.5 points, so to whole
        // percent.
        let guest = [48.0, 50.0, 52.0, 49.0, 51.5, 50.5];
        let p = percent_of_host(&guest, &[100.0], 50.3456, 100.0).unwrap();
        assert_eq!(p.percent, 50.0);
        assert_eq!(p.basis.resolution, Some(1.0));
        assert_eq!(p.basis.method, SINGLE);
        assert!(
            p.basis
                .no_interval
                .unwrap()
                .contains("a single host process")
        );
        // A quiet guest (0.1%) supports two decimals... 0.05 points, so 0.01.
        let quiet = [50.0, 50.05, 49.95, 50.02];
        let p = percent_of_host(&quiet, &[100.0], 50.0123, 100.0).unwrap();
        assert_eq!(p.basis.resolution, Some(0.01));
        assert_eq!(p.percent, 50.01);
        // No spread at all to go by: whole percent.
        let p = percent_of_host(&[50.0], &[100.0], 50.4, 100.0).unwrap();
        assert_eq!((p.percent, p.basis.resolution), (50.0, Some(1.0)));
    }

    #[test]
    fn rounding_leaves_no_binary_dust() {
        assert_eq!(round_to(52.345, 0.1), 52.3);
        assert_eq!(round_to(52.35001, 0.1), 52.4);
        assert_eq!(round_to(57.0, 10.0), 60.0);
        assert_eq!(resolution(50.0, &[0.0, 0.6, -0.6]), 10.0);
    }
}
