//! Calibration of the speedup interval against simulated truth: thousands of experiments with
//! a known true ratio, run through [`paired_ratio`] and [`verdict`], over a grid of process
//! counts and noise levels. The nominal 95% interval must cover the truth in at least 93% of
//! them at every grid point, and each verdict must keep its error rate; deliberately wrong
//! methods (a fixed run order, samples taken as independent) must fail the same check, or the
//! check proves nothing.
//!
//! The simulated machine (log scale, natural log units): each llama-bench process has its own
//! level `N(0, between²)`; on a busy machine one process in eight is also slowed by 30%; its
//! samples follow an AR(1) series (correlation 0.7, spread `within`) and a warm-up trend; a
//! condition lingers from each process into the next; the machine drifts over the run (a
//! linear trend plus a random walk, one step per process); and on the "periodic" machine a
//! disturbance halves the speed of 2 process slots in every 8 or so (a neighbour's periodic
//! job; one A/A bench here had one arm's processes slowed 2–2.7× in 3 of 10 rounds). The arms
//! run in a random order per round, as `capshim bench` runs them; the fixed order of the
//! schema-3 bench (AB AB BA BA) with its crossover t interval must fail under the periodic
//! disturbance, which falls in step with it.

use super::interval::{
    CONFIDENCE_LEVEL, Interval, MIN_ROUNDS, NOISE, NoInterval, RoundPair, Verdict, paired_ratio,
    verdict,
};
use super::ranks::t_quantile;
use super::sim::{BUSY, Noise, PERIODIC, QUIET, SplitMix64, TYPICAL};
use super::stats::median;

/// One simulated round: its number, the arm's samples and stock's (tokens/s), and whether stock
/// ran second.
type Round = (u32, Vec<f64>, Vec<f64>, bool);

/// How a simulated bench orders each round's two processes.
#[derive(Clone, Copy)]
enum Order {
    /// A fair coin per round, as `capshim bench` draws it.
    Random,
    /// A fixed pattern: `reversed(round)` puts stock second.
    Fixed(fn(u32) -> bool),
}

/// The schema-3 bench's order: rounds 1 and 2 forward, 3 and 4 reversed, ...
fn ab_ab_ba_ba(round: u32) -> bool {
    (round.saturating_sub(1) / 2) % 2 == 1
}

/// One simulated bench of two arms (stock and one other whose true speed is `ratio` × stock),
/// `rounds` rounds of `reps` samples per process, in random order: per round, the samples of
/// each process.
fn experiment(
    rng: &mut SplitMix64,
    rounds: usize,
    reps: usize,
    ratio: f64,
    noise: Noise,
) -> Vec<Round> {
    experiment_in(rng, rounds, reps, ratio, noise, Order::Random)
}

/// [`experiment`] in a given order.
fn experiment_in(
    rng: &mut SplitMix64,
    rounds: usize,
    reps: usize,
    ratio: f64,
    noise: Noise,
    order: Order,
) -> Vec<Round> {
    let mut level = 0.0;
    let mut slot = 0usize;
    let mut lingering = noise.linger * rng.normal();
    let period = 7.6 + 0.8 * rng.uniform();
    let phase = period * rng.uniform();
    // The machine's conditions come from the same draws whichever arm runs in a slot: what the
    // order decides is only which arm meets them.
    let mut process = |rng: &mut SplitMix64, effect: f64| -> Vec<f64> {
        level += noise.walk * rng.normal();
        let fresh = noise.linger * rng.normal();
        let linger = (fresh + lingering) / 2f64.sqrt();
        lingering = fresh;
        let drift = noise.slope * slot as f64 + level + linger;
        let disturbed = noise.periodic && (slot as f64 + phase) % period < 2.0;
        slot += 1;
        let hit = if rng.uniform() < noise.hit {
            0.7f64.ln()
        } else {
            0.0
        };
        let periodic = if disturbed { 0.5f64.ln() } else { 0.0 };
        let base = 100f64.ln() + effect + drift + hit + periodic + noise.between * rng.normal();
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
            let stock_second = match order {
                Order::Random => rng.uniform() < 0.5,
                Order::Fixed(reversed) => reversed(round),
            };
            if !stock_second {
                let s = process(rng, 0.0);
                let a = process(rng, ratio.ln());
                (round, a, s, false)
            } else {
                let a = process(rng, ratio.ln());
                let s = process(rng, 0.0);
                (round, a, s, true)
            }
        })
        .collect()
}

/// An interval method under test: the experiment's rounds to an interval, or none.
type Method = fn(&[Round]) -> Option<Interval>;

/// Each round's two process medians.
fn round_pairs(rounds: &[Round]) -> Vec<RoundPair> {
    rounds
        .iter()
        .map(|(round, a, s, _)| RoundPair {
            round: *round,
            arm: median(a).unwrap(),
            reference: median(s).unwrap(),
        })
        .collect()
}

/// capshim's method: per-round medians, paired, through [`paired_ratio`].
fn capshim(rounds: &[Round]) -> Option<Interval> {
    paired_ratio(&round_pairs(rounds)).ok().map(|p| p.interval)
}

/// Schema 3's method: the crossover t interval (the mean of the two run orders' mean log
/// ratios, Student's t with rounds − 2 degrees of freedom). Valid only when the disturbances
/// are not in step with the order.
fn crossover_t(rounds: &[Round]) -> Option<Interval> {
    let mut groups: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    for (_, a, s, stock_second) in rounds {
        groups[usize::from(*stock_second)].push((median(a)? / median(s)?).ln());
    }
    if rounds.len() < 4 || groups.iter().any(Vec::is_empty) {
        return None;
    }
    let mean = |g: &[f64]| g.iter().sum::<f64>() / g.len() as f64;
    let (m0, m1) = (mean(&groups[0]), mean(&groups[1]));
    let squares: f64 = groups[0]
        .iter()
        .map(|d| (d - m0).powi(2))
        .chain(groups[1].iter().map(|d| (d - m1).powi(2)))
        .sum();
    let df = rounds.len() - 2;
    let sd = (squares / df as f64).sqrt();
    let (n0, n1) = (groups[0].len() as f64, groups[1].len() as f64);
    let reach = t_quantile(CONFIDENCE_LEVEL, df) * sd / 2.0 * (1.0 / n0 + 1.0 / n1).sqrt();
    let center = (m0 + m1) / 2.0;
    Some(Interval {
        level: CONFIDENCE_LEVEL,
        low: (center - reach).exp(),
        high: (center + reach).exp(),
    })
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

#[allow(clippy::too_many_arguments)]
fn tally(
    method: Method,
    order: Order,
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
        let e = experiment_in(&mut rng, rounds, reps, ratio, noise, order);
        let Some(interval) = method(&e) else {
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
/// binomial standard error at 2.5% is 0.4%; some 50 rates are checked at the band's edges).
const WRONG_CALL: f64 = 0.04;
/// Process counts: from the minimum through the default (12) to long runs.
const ROUND_GRID: [usize; 6] = [MIN_ROUNDS, 7, 10, 12, 16, 40];
const NOISE_GRID: [(&str, Noise); 4] = [
    ("quiet", QUIET),
    ("typical", TYPICAL),
    ("busy", BUSY),
    ("periodic", PERIODIC),
];

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
                let t = tally(
                    capshim,
                    Order::Random,
                    seed,
                    RUNS,
                    rounds,
                    reps,
                    ratio,
                    noise,
                );
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

/// The lowest coverage of the true ratio 1.0 over the grid, with `method` in `order`.
fn worst(method: Method, order: Order) -> f64 {
    let mut worst = 1.0f64;
    for rounds in ROUND_GRID {
        for (_, noise) in NOISE_GRID {
            let t = tally(method, order, 0xbad, RUNS, rounds, 3, 1.0, noise);
            worst = worst.min(t.rate(t.covered));
        }
    }
    worst
}

#[test]
fn the_check_fails_a_wrong_method() {
    // A method that is wrong at some grid point the defaults reach must fall below the floor
    // there: otherwise the calibration test could not catch it.
    let right = worst(capshim, Order::Random);
    assert!(right >= FLOOR, "capshim covered {right:.3}");
    let pooled = worst(samples_as_units, Order::Random);
    eprintln!("worst coverage: capshim {right:.3}, samples as units {pooled:.3}");
    assert!(pooled < 0.8, "samples as units covered {pooled:.3}");
}

#[test]
fn the_check_fails_a_fixed_order() {
    // Schema 3's bench: AB AB BA BA and the crossover t interval. A disturbance in step with
    // the pattern hands one arm its slow slots in both run orders, and the interval, which
    // trusts the order to balance them, is too narrow; the same signed-rank interval on the
    // same fixed order fails too: the level comes from the random order, not from the ranks.
    let fixed = Order::Fixed(ab_ab_ba_ba);
    let old = worst(crossover_t, fixed);
    let ranks_fixed = worst(capshim, fixed);
    eprintln!("worst coverage, fixed order: crossover t {old:.3}, signed rank {ranks_fixed:.3}");
    assert!(old < FLOOR, "crossover t in AB AB BA BA covered {old:.3}");
    assert!(
        ranks_fixed < FLOOR,
        "signed rank in AB AB BA BA covered {ranks_fixed:.3}"
    );
}

#[test]
fn below_the_minimum_there_is_no_interval() {
    let mut rng = SplitMix64(7);
    for rounds in 0..MIN_ROUNDS {
        for reps in [1, 3, 10, 50] {
            let e = experiment(&mut rng, rounds, reps, 1.0, TYPICAL);
            assert_eq!(capshim(&e), None, "{rounds} rounds, -r {reps}");
            assert_eq!(
                paired_ratio(&round_pairs(&e)),
                Err(NoInterval::TooFewRounds { paired: rounds })
            );
        }
    }
}
