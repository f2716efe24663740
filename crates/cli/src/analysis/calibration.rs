//! Calibration of the speedup interval against simulated truth: thousands of experiments with
//! a known true ratio, run through [`paired_ratio`] and [`verdict`], over a grid of process
//! counts and noise levels. The nominal 95% interval must cover the truth in at least 93% of
//! them at every grid point, and each verdict must keep its error rate; a deliberately wrong
//! method (the wrong degrees of freedom, the normal quantile, samples taken as independent)
//! must fail the same check, or the check proves nothing.
//!
//! The simulated machine (log scale, natural log units): each llama-bench process has its own
//! level `N(0, between²)`; on a busy machine one process in eight is also slowed by 30%; its
//! samples follow an AR(1) series (correlation 0.7, spread `within`) and a warm-up trend; a
//! condition lingers from each process into the next; the machine drifts over the run (a
//! linear trend plus a random walk, one step per process). The arms run in the order of
//! `capshim bench` ([`reversed`]). The old order, ABBA (reversing every round), must fail the
//! same check under lingering conditions.

use super::interval::{
    CONFIDENCE_LEVEL, Interval, MIN_ROUNDS, NOISE, NoInterval, RoundPair, Verdict, paired_ratio,
    reversed, t_quantile, verdict,
};
use super::stats::median;

/// One simulated round: its number, the arm's samples and stock's, tokens/s.
type Round = (u32, Vec<f64>, Vec<f64>);

/// SplitMix64: a small generator whose whole state is one `u64`, reproducible from its seed.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1).
    fn uniform(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// Standard normal (Box–Muller).
    fn normal(&mut self) -> f64 {
        let (u, v) = (self.uniform(), self.uniform());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }
}

/// How noisy the simulated machine is.
#[derive(Clone, Copy, Debug)]
struct Noise {
    /// Spread of a process's level (log units).
    between: f64,
    /// Spread of one sample within a process (log units).
    within: f64,
    /// Linear drift per process slot (log units).
    slope: f64,
    /// Random-walk step per process slot (log units).
    walk: f64,
    /// Probability that a process is slowed by 30% (a busy neighbour).
    hit: f64,
    /// Spread of a condition that lingers from one process into the next and no further
    /// (each process gets a fresh one and half of its predecessor's: correlation 0.5 between
    /// neighbours, 0 beyond; log units). On this machine the log medians of neighbouring
    /// processes correlated by 0.13–0.36, and by 0.04–0.16 two apart.
    linger: f64,
}

const QUIET: Noise = Noise {
    between: 0.005,
    within: 0.01,
    slope: 0.001,
    walk: 0.002,
    hit: 0.0,
    linger: 0.005,
};
const TYPICAL: Noise = Noise {
    between: 0.04,
    within: 0.05,
    slope: 0.004,
    walk: 0.01,
    hit: 0.0,
    linger: 0.06,
};
const BUSY: Noise = Noise {
    between: 0.12,
    within: 0.15,
    slope: 0.01,
    walk: 0.04,
    hit: 0.125,
    linger: 0.2,
};

/// One simulated bench of two arms (stock and one other whose true speed is `ratio` × stock),
/// `rounds` rounds of `reps` samples per process: per round, the medians of each process.
fn experiment(
    rng: &mut SplitMix64,
    rounds: usize,
    reps: usize,
    ratio: f64,
    noise: Noise,
) -> Vec<Round> {
    experiment_in(rng, rounds, reps, ratio, noise, reversed)
}

/// [`experiment`] with another run order: `reversed(round)` puts stock second in a round.
fn experiment_in(
    rng: &mut SplitMix64,
    rounds: usize,
    reps: usize,
    ratio: f64,
    noise: Noise,
    reversed: fn(u32) -> bool,
) -> Vec<Round> {
    let mut level = 0.0;
    let mut slot = 0usize;
    let mut lingering = noise.linger * rng.normal();
    let mut process = |rng: &mut SplitMix64, effect: f64| -> Vec<f64> {
        level += noise.walk * rng.normal();
        let fresh = noise.linger * rng.normal();
        let linger = (fresh + lingering) / 2f64.sqrt();
        lingering = fresh;
        let drift = noise.slope * slot as f64 + level + linger;
        slot += 1;
        let hit = if rng.uniform() < noise.hit {
            0.7f64.ln()
        } else {
            0.0
        };
        let base = 100f64.ln() + effect + drift + hit + noise.between * rng.normal();
        let rho: f64 = 0.7;
        let mut e = noise.within * rng.normal();
        (0..reps)
            .map(|j| {
                if j > 0 {
                    e = rho * e + (1.0 - rho * rho).sqrt() * noise.within * rng.normal();
                }
                // Warm-up: the first samples of a process run slower.
                let warm = -0.05 * 0.5f64.powi(j as i32);
                (base + e + warm).exp()
            })
            .collect()
    };
    (1..=rounds as u32)
        .map(|round| {
            if !reversed(round) {
                let s = process(rng, 0.0);
                let a = process(rng, ratio.ln());
                (round, a, s)
            } else {
                let a = process(rng, ratio.ln());
                let s = process(rng, 0.0);
                (round, a, s)
            }
        })
        .collect()
}

/// An interval method under test: the experiment's rounds to an interval, or none.
type Method = fn(&[Round]) -> Option<Interval>;

/// capshim's method: per-round medians, paired, through [`paired_ratio`].
fn capshim(rounds: &[Round]) -> Option<Interval> {
    let pairs: Vec<RoundPair> = rounds
        .iter()
        .map(|(round, a, s)| RoundPair {
            round: *round,
            arm: median(a).unwrap(),
            reference: median(s).unwrap(),
        })
        .collect();
    paired_ratio(&pairs).ok().map(|p| p.interval)
}

/// The crossover interval with the quantile of `df(n)` degrees of freedom instead of n − 2.
fn crossover_with(rounds: &[Round], df: fn(usize) -> usize) -> Option<Interval> {
    let p = paired_ratio(
        &rounds
            .iter()
            .map(|(round, a, s)| RoundPair {
                round: *round,
                arm: median(a).unwrap(),
                reference: median(s).unwrap(),
            })
            .collect::<Vec<_>>(),
    )
    .ok()?;
    let n = rounds.len();
    let right = t_quantile(CONFIDENCE_LEVEL, n - 2);
    let wrong = t_quantile(CONFIDENCE_LEVEL, df(n));
    let reach = (p.interval.high / p.center).ln() * wrong / right;
    Some(Interval {
        level: CONFIDENCE_LEVEL,
        low: p.center * (-reach).exp(),
        high: p.center * reach.exp(),
    })
}

/// Wrong: n − 1 degrees of freedom (a paired t ignoring that the two run orders were fitted).
fn one_df_too_many(rounds: &[Round]) -> Option<Interval> {
    crossover_with(rounds, |n| n - 1)
}

/// Wrong: every sample taken as independent (Welch on all log samples, df from the sample
/// count), the pseudo-replication the old two-round bench invited.
fn samples_as_units(rounds: &[Round]) -> Option<Interval> {
    let logs = |pick: fn(&Round) -> &Vec<f64>| -> Vec<f64> {
        rounds
            .iter()
            .flat_map(|r| pick(r).iter().map(|v| v.ln()))
            .collect()
    };
    let (a, s) = (logs(|r| &r.1), logs(|r| &r.2));
    let stats = |v: &[f64]| {
        let n = v.len() as f64;
        let m = v.iter().sum::<f64>() / n;
        (
            m,
            v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0) / n,
        )
    };
    let ((ma, va), (ms, vs)) = (stats(&a), stats(&s));
    let reach = t_quantile(CONFIDENCE_LEVEL, a.len() + s.len() - 2) * (va + vs).sqrt();
    Some(Interval {
        level: CONFIDENCE_LEVEL,
        low: (ma - ms - reach).exp(),
        high: (ma - ms + reach).exp(),
    })
}

/// What happened over many experiments at one grid point.
#[derive(Debug, Default)]
struct Tally {
    runs: usize,
    covered: usize,
    faster: usize,
    slower: usize,
    no_difference: usize,
}

impl Tally {
    fn rate(&self, count: usize) -> f64 {
        count as f64 / self.runs as f64
    }
}

fn tally(
    method: Method,
    seed: u64,
    runs: usize,
    rounds: usize,
    reps: usize,
    ratio: f64,
    noise: Noise,
) -> Tally {
    let mut rng = SplitMix64(seed);
    let mut t = Tally::default();
    for _ in 0..runs {
        let Some(interval) = method(&experiment(&mut rng, rounds, reps, ratio, noise)) else {
            continue;
        };
        t.runs += 1;
        t.covered += usize::from(interval.contains(ratio));
        match verdict(&interval) {
            Verdict::Faster => t.faster += 1,
            Verdict::Slower => t.slower += 1,
            Verdict::NoMeasurableDifference => t.no_difference += 1,
            Verdict::Inconclusive => {}
        }
    }
    t
}

/// Experiments per grid point: the coverage's binomial standard error is 0.5% at 95%, so a
/// calibrated method stays well above the 93% floor and one off by a few points falls below.
const RUNS: usize = 1500;
/// Lowest acceptable coverage of the nominal 95% interval.
const FLOOR: f64 = 0.93;
/// Highest acceptable rate of one wrong verdict: nominal 2.5%, plus sampling slack (the
/// binomial standard error at 2.5% is 0.4%; some 40 rates are checked at the band's edges).
const WRONG_CALL: f64 = 0.04;
/// Process counts: from the minimum through the default (10) to long runs.
const ROUND_GRID: [usize; 6] = [MIN_ROUNDS, 5, 6, 10, 16, 40];
const NOISE_GRID: [(&str, Noise); 3] = [("quiet", QUIET), ("typical", TYPICAL), ("busy", BUSY)];

#[test]
fn the_interval_covers_the_true_ratio_and_verdicts_keep_their_error_rates() {
    let mut failures = Vec::new();
    let mut lines = Vec::new();
    let mut seed = 0x5eed_0001;
    for rounds in ROUND_GRID {
        for (name, noise) in NOISE_GRID {
            // No difference, the edges of the band, and a clear speedup; repetitions per
            // process: the default (3) and a single sample.
            for (ratio, reps) in [
                (1.0, 3),
                (1.0 + NOISE, 3),
                (1.0 - NOISE, 1),
                (1.10, 3),
                (7.2, 1),
            ] {
                seed += 1;
                let t = tally(capshim, seed, RUNS, rounds, reps, ratio, noise);
                let at = format!("{rounds} rounds, -r {reps}, {name}, true ratio {ratio}");
                lines.push(format!(
                    "{at}: coverage {:.3}, faster {:.3}, slower {:.3}, no measurable difference {:.3}",
                    t.rate(t.covered),
                    t.rate(t.faster),
                    t.rate(t.slower),
                    t.rate(t.no_difference)
                ));
                assert_eq!(
                    t.runs, RUNS,
                    "{at}: every experiment at or above the minimum has an interval"
                );
                if t.rate(t.covered) < FLOOR {
                    failures.push(format!("{at}: coverage {:.3}", t.rate(t.covered)));
                }
                // Wrong calls: a speedup or slowdown for a ratio within the band, the wrong
                // direction, "no measurable difference" for a ratio beyond the band.
                let inside = (1.0 - NOISE..=1.0 + NOISE).contains(&ratio);
                let mut wrong = vec![];
                if inside {
                    wrong.push(("faster", t.faster));
                    wrong.push(("slower", t.slower));
                } else {
                    wrong.push(("no measurable difference", t.no_difference));
                    wrong.push(if ratio > 1.0 {
                        ("slower", t.slower)
                    } else {
                        ("faster", t.faster)
                    });
                }
                for (call, count) in wrong {
                    if t.rate(count) > WRONG_CALL {
                        failures.push(format!("{at}: {call} in {:.3}", t.rate(count)));
                    }
                }
            }
        }
    }
    // `cargo test calibration -- --nocapture` shows every grid point.
    eprintln!("{}", lines.join("\n"));
    assert!(
        failures.is_empty(),
        "miscalibrated:\n{}",
        failures.join("\n")
    );
}

#[test]
fn the_check_fails_a_wrong_method() {
    // A method that is wrong at some grid point the defaults reach must fall below the floor
    // there: otherwise the calibration test could not catch it.
    let worst = |method: Method| {
        let mut worst = 1.0f64;
        for rounds in ROUND_GRID {
            for (_, noise) in NOISE_GRID {
                let t = tally(method, 0xbad, RUNS, rounds, 3, 1.0, noise);
                worst = worst.min(t.rate(t.covered));
            }
        }
        worst
    };
    assert!(worst(capshim) >= FLOOR);
    let one_df = worst(one_df_too_many);
    assert!(
        one_df < FLOOR,
        "n − 1 degrees of freedom covered {one_df:.3}"
    );
    eprintln!(
        "worst coverage: capshim {:.3}, n − 1 df {one_df:.3}",
        worst(capshim)
    );
    let pooled = worst(samples_as_units);
    eprintln!("worst coverage, samples as units: {pooled:.3}");
    assert!(pooled < 0.8, "samples as units covered {pooled:.3}");
}

/// ABBA: stock second in every even round.
fn abba(round: u32) -> bool {
    round % 2 == 0
}

#[test]
fn the_check_fails_the_abba_order() {
    // Reversing every round puts the same arm twice in a row at every round boundary, so a
    // lingering condition always favours one arm across it: neighbouring rounds' ratios
    // correlate and the interval is too narrow. Same analysis, its sequences grouped by ABBA's
    // order (rounds renumbered to fall in paired_ratio's groups).
    let mut worst = 1.0f64;
    for rounds in ROUND_GRID {
        for (_, noise) in NOISE_GRID {
            let mut rng = SplitMix64(0xabba);
            let mut covered = 0;
            for _ in 0..RUNS {
                let e = experiment_in(&mut rng, rounds, 3, 1.0, noise, abba);
                let pairs: Vec<RoundPair> = e
                    .iter()
                    .map(|(round, a, s)| RoundPair {
                        round: if abba(*round) { 3 } else { 1 },
                        arm: median(a).unwrap(),
                        reference: median(s).unwrap(),
                    })
                    .collect();
                covered += usize::from(paired_ratio(&pairs).unwrap().interval.contains(1.0));
            }
            worst = worst.min(covered as f64 / RUNS as f64);
        }
    }
    eprintln!("worst coverage, ABBA order: {worst:.3}");
    assert!(worst < FLOOR, "ABBA covered {worst:.3}");
}

#[test]
fn below_the_minimum_there_is_no_interval() {
    let mut rng = SplitMix64(7);
    for rounds in 0..MIN_ROUNDS {
        for reps in [1, 3, 10, 50] {
            let e = experiment(&mut rng, rounds, reps, 1.0, TYPICAL);
            assert_eq!(capshim(&e), None, "{rounds} rounds, -r {reps}");
            let pairs: Vec<RoundPair> = e
                .iter()
                .map(|(round, a, s)| RoundPair {
                    round: *round,
                    arm: median(a).unwrap(),
                    reference: median(s).unwrap(),
                })
                .collect();
            assert_eq!(
                paired_ratio(&pairs),
                Err(NoInterval::TooFewRounds { paired: rounds })
            );
        }
    }
}
