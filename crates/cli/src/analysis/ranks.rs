//! The Wilcoxon signed-rank statistic and the Walsh averages its interval is made of, and the
//! normal and Student t distributions the rest of the analysis (and its tests) need. Pure
//! arithmetic on numbers; what the numbers are is [`super::interval`]'s business.

/// Rounds up to which the signed-rank statistic's null distribution is counted exactly; above,
/// its normal approximation (with continuity correction) is used, whose error in the tail
/// probability is far below 0.001 there.
pub const EXACT_ROUNDS: usize = 200;

/// The number of Walsh averages of `n` values: `n (n + 1) / 2`.
pub fn walsh_count(n: usize) -> u64 {
    let n = n as u64;
    n * (n + 1) / 2
}

/// The largest `k` with `P(W ≤ k) ≤ (1 − level) / 2` for the signed-rank statistic `W` of `n`
/// rounds under fair signs (`level` in (0, 1)), and the interval's exact level
/// `1 − 2 P(W ≤ k)`; `None` when even `W = 0` is too likely (at 0.95: fewer than 6 rounds).
/// The interval runs from the `(k + 1)`-th smallest Walsh average to the `(k + 1)`-th largest.
pub fn critical_value(n: usize, level: f64) -> Option<(u64, f64)> {
    let tail = (1.0 - level) / 2.0;
    if n > EXACT_ROUNDS {
        let (n, m) = (n as f64, walsh_count(n) as f64);
        let (mu, sigma) = (m / 2.0, (n * (n + 1.0) * (2.0 * n + 1.0) / 24.0).sqrt());
        let k = (mu - normal_quantile(1.0 - 2.0 * tail) * sigma - 0.5).floor();
        let lower = 1.0 - normal_upper_tail((k + 0.5 - mu) / sigma);
        return Some((k as u64, 1.0 - 2.0 * lower));
    }
    // P(W = w) for W = Σ i·[sign i is +], i = 1..=n, counted one rank at a time; only the
    // lower tail is needed, which ends below the mean n(n+1)/4.
    let top = n * (n + 1) / 4;
    let mut p = vec![0.0f64; top + 1];
    p[0] = 1.0;
    for i in 1..=n {
        for w in (0..=top).rev() {
            let with = if w >= i { p[w - i] } else { 0.0 };
            p[w] = (p[w] + with) / 2.0;
        }
    }
    let mut below = 0.0;
    let mut k = None;
    for (w, pw) in p.iter().enumerate() {
        // A relative slack of 1e-12 keeps an exact 2.5% tail (never met in practice) inside.
        if below + pw > tail * (1.0 + 1e-12) {
            break;
        }
        below += pw;
        k = Some(w as u64);
    }
    k.map(|k| (k, 1.0 - 2.0 * below))
}

/// The `k`-th smallest (0-based) Walsh average `(d_i + d_j) / 2`, `i ≤ j`, of the sorted
/// values `d`, without listing the `n (n + 1) / 2` of them: the smallest double `t` with more
/// than `k` Walsh averages at or below it, found by bisection over the doubles in order (at
/// most 64 steps of one linear count), so it is exactly one of them.
pub fn walsh_nth(d: &[f64], k: u64) -> f64 {
    // Doubles mapped to integers in the same order (negative ones reversed), so that
    // bisecting the integers bisects the doubles.
    let key = |x: f64| {
        let bits = x.to_bits();
        if bits >> 63 == 1 {
            !bits
        } else {
            bits | 1 << 63
        }
    };
    let value = |key: u64| {
        f64::from_bits(if key >> 63 == 1 {
            key & !(1 << 63)
        } else {
            !key
        })
    };
    let (mut lo, mut hi) = (key(d[0]), key(d[d.len() - 1]));
    if walsh_at_most(d, value(lo)) > k {
        return d[0];
    }
    // Invariant: at most k Walsh averages ≤ value(lo), more than k ≤ value(hi).
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if walsh_at_most(d, value(mid)) > k {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    value(hi)
}

/// How many Walsh averages of the sorted values `d` are at most `t`: for each `i`, the `j ≥ i`
/// with `(d_i + d_j) / 2 ≤ t`, whose bound only falls as `i` rises (one pass, two pointers).
fn walsh_at_most(d: &[f64], t: f64) -> u64 {
    let mut count = 0u64;
    let mut end = d.len();
    for (i, x) in d.iter().enumerate() {
        while end > i && (x + d[end - 1]) / 2.0 > t {
            end -= 1;
        }
        if end <= i {
            break;
        }
        count += (end - i) as u64;
    }
    count
}

/// `P(Z > x)` for a standard normal `Z`, from the two-sided series of [`normal_quantile`].
pub fn normal_upper_tail(x: f64) -> f64 {
    let inside = normal_two_sided(x.abs());
    if x >= 0.0 {
        (1.0 - inside) / 2.0
    } else {
        (1.0 + inside) / 2.0
    }
}

/// `P(|Z| ≤ x)` for `x ≥ 0`, by the everywhere-convergent series
/// `2 φ(x) (x + x³/3 + x⁵/(3·5) + …)`.
fn normal_two_sided(x: f64) -> f64 {
    let (mut term, mut sum, mut k) = (x, x, 1.0);
    while term > 1e-17 * sum {
        k += 2.0;
        term *= x * x / k;
        sum += term;
    }
    2.0 * sum * (-x * x / 2.0).exp() / (2.0 * std::f64::consts::PI).sqrt()
}

/// The two-sided standard normal quantile: the `z` with `P(|Z| ≤ z) = level` (1.95996 for
/// 0.95), by bisection on [`normal_two_sided`].
pub fn normal_quantile(level: f64) -> f64 {
    bisect(level, normal_two_sided)
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

/// The `p`-quantile of the chi-square distribution with `df ≥ 1` degrees of freedom (`p` in
/// (0, 1)), by the Wilson–Hilferty cube-root normal approximation, within 1% of tables from
/// 3 degrees of freedom on for `p` between 0.1 and 0.9.
pub fn chi_square_quantile(p: f64, df: usize) -> f64 {
    let z = normal_quantile((2.0 * p - 1.0).abs()) * if p < 0.5 { -1.0 } else { 1.0 };
    let k = df as f64;
    let c = 2.0 / (9.0 * k);
    k * (1.0 - c + z * c.sqrt()).powi(3).max(0.0)
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

    #[test]
    fn chi_square_quantiles_match_published_tables() {
        // 80% and 20% quantiles, from standard chi-square tables.
        for (df, q80, q20) in [
            (5, 7.289, 2.343),
            (11, 14.631, 6.989),
            (25, 30.675, 18.940),
            (100, 111.667, 87.945),
        ] {
            let (a, b) = (chi_square_quantile(0.8, df), chi_square_quantile(0.2, df));
            assert!((a / q80 - 1.0).abs() < 0.005, "df {df}: {a} vs {q80}");
            assert!((b / q20 - 1.0).abs() < 0.01, "df {df}: {b} vs {q20}");
        }
    }

    #[test]
    fn critical_values_match_published_tables() {
        // Two-sided 5% critical values of the Wilcoxon signed-rank statistic, from standard
        // tables (reject when W ≤ value).
        for (n, table) in [
            (6, 0),
            (7, 2),
            (8, 3),
            (9, 5),
            (10, 8),
            (12, 13),
            (15, 25),
            (20, 52),
            (25, 89),
            (30, 137),
        ] {
            let (k, coverage) = critical_value(n, 0.95).unwrap();
            assert_eq!(k, table, "n = {n}");
            assert!((0.95..1.0).contains(&coverage), "n = {n}: {coverage}");
        }
        // 25 of the 1024 sign patterns of 10 ranks have W ≤ 8: 1 − 2 × 25/1024.
        assert!((critical_value(10, 0.95).unwrap().1 - (1.0 - 50.0 / 1024.0)).abs() < 1e-12);
        for n in 0..6 {
            assert_eq!(critical_value(n, 0.95), None, "n = {n}");
        }
        // The normal approximation above EXACT_ROUNDS meets the exact count below it.
        let (exact, level) = critical_value(EXACT_ROUNDS, 0.95).unwrap();
        let (k, approx) = critical_value(EXACT_ROUNDS + 1, 0.95).unwrap();
        assert!(
            k > exact && k - exact < EXACT_ROUNDS as u64 + 10,
            "{exact} {k}"
        );
        assert!((approx - level).abs() < 0.002 && approx >= 0.95 - 1e-3);
    }

    #[test]
    fn walsh_averages_are_selected_exactly() {
        let d = [-0.3, -0.1, 0.0, 0.05, 0.05, 0.2, 1.5];
        let mut all: Vec<f64> = (0..d.len())
            .flat_map(|i| (i..d.len()).map(move |j| (d[i] + d[j]) / 2.0))
            .collect();
        all.sort_by(f64::total_cmp);
        for (k, w) in all.iter().enumerate() {
            assert_eq!(walsh_nth(&d, k as u64), *w, "k = {k}");
        }
        assert_eq!(walsh_count(d.len()), all.len() as u64);
    }

    proptest::proptest! {
        #[test]
        fn walsh_selection_matches_listing_them(
            mut d in proptest::collection::vec(-5.0f64..5.0, 1..30),
            pick in 0.0f64..1.0,
        ) {
            d.sort_by(f64::total_cmp);
            let mut all: Vec<f64> = (0..d.len())
                .flat_map(|i| (i..d.len()).map(|j| (d[i] + d[j]) / 2.0).collect::<Vec<_>>())
                .collect();
            all.sort_by(f64::total_cmp);
            let k = ((all.len() - 1) as f64 * pick) as usize;
            proptest::prop_assert_eq!(walsh_nth(&d, k as u64), all[k]);
        }
    }
}
