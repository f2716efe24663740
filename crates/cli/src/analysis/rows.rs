//! One row per test: each arm's samples merged over its runs, measured, and compared with the
//! stock and host arms that are its references.

use super::across;
use super::host;
use super::input::{ArmInput, Derivation, Role};
use super::interval::{self, NoInterval, RoundPair};
use super::summary::{ArmStats, Ordered, RoundRatio, RoundStats, Row};
use super::{stats, warnings};
use crate::llama::{ModelId, TestKey};

/// One arm's samples of one test: all of them, and per round.
struct Merged {
    samples: Vec<f64>,
    rounds: Vec<(u32, Vec<f64>)>,
}

/// `arm`'s samples of test `key`; `None` when it has none.
fn merged(arm: &ArmInput, key: TestKey) -> Option<Merged> {
    let mut m = Merged {
        samples: Vec::new(),
        rounds: Vec::new(),
    };
    for run in &arm.runs {
        for row in run.rows.iter().filter(|r| r.key == key) {
            m.samples.extend(&row.samples_ts);
            match m.rounds.iter_mut().find(|(r, _)| *r == run.round) {
                Some((_, v)) => v.extend(&row.samples_ts),
                None => m.rounds.push((run.round, row.samples_ts.clone())),
            }
        }
    }
    (!m.samples.is_empty()).then_some(m)
}

/// The unit of `arm`'s samples of test `key` when they are not tokens/s (a command's).
fn merged_unit(arm: &ArmInput, key: TestKey) -> Option<String> {
    arm.runs
        .iter()
        .flat_map(|r| r.rows.iter())
        .find(|r| r.key == key)
        .and_then(|r| r.unit.clone())
}

/// The rounds both sides ran, each side's round median paired; in round order. Where a
/// lower value is better (`lower`, a command's wall time) the sides are swapped, so that every
/// ratio built on the pairs is reference / arm and above 1 still means the arm is better.
fn pairs(arm: &Merged, reference: &Merged, lower: bool) -> Vec<RoundPair> {
    if lower {
        return pairs(reference, arm, false);
    }
    let mut pairs: Vec<RoundPair> = arm
        .rounds
        .iter()
        .filter_map(|(round, samples)| {
            let (_, other) = reference.rounds.iter().find(|(r, _)| r == round)?;
            Some(RoundPair {
                round: *round,
                arm: stats::median(samples)?,
                reference: stats::median(other)?,
            })
        })
        .collect();
    pairs.sort_by_key(|p| p.round);
    pairs
}

/// `arm`'s reference of `role` among `arms`. Never another bundle's reference: one's own
/// group's, else one meant for every arm.
pub(super) fn reference<'a>(
    arms: &'a [ArmInput],
    arm: &ArmInput,
    role: Role,
) -> Option<&'a ArmInput> {
    let global = |a: &&ArmInput| a.role == role && (a.group.is_none() || a.reference_for_all);
    arms.iter()
        .find(|a| a.role == role && a.reference_for_all)
        .or_else(|| {
            arms.iter()
                .find(|a| a.role == role && a.group.is_some() && a.group == arm.group)
        })
        .or_else(|| arms.iter().find(global))
}

/// The rows of the table, tests in order of first appearance, arms in display `order`;
/// noise warnings are added to `warnings`. `models` holds each arm's model.
pub fn rows(
    arms: &[ArmInput],
    order: &[&ArmInput],
    models: &[(String, ModelId)],
    derivation: Derivation,
    warnings: &mut Vec<String>,
) -> Vec<Row> {
    let schema6 = derivation == Derivation::Schema6;
    // Tests in order of first appearance.
    let mut keys: Vec<TestKey> = Vec::new();
    for arm in order {
        for run in &arm.runs {
            for row in &run.rows {
                if !keys.contains(&row.key) {
                    keys.push(row.key);
                }
            }
        }
    }

    let mut rows = Vec::new();
    let mut unrandomized: Vec<String> = Vec::new();
    for key in keys {
        let lower = key.quantity.lower_is_better();
        // The better way round: arm / reference, or reference / arm where lower is better.
        let better = |arm: f64, reference: f64| {
            if lower {
                reference / arm
            } else {
                arm / reference
            }
        };
        let mut cells = Vec::new();
        for arm in order {
            let Some(m) = merged(arm, key) else {
                cells.push((arm.name.clone(), None));
                continue;
            };
            let median = stats::median(&m.samples).expect("non-empty");
            let (min, max) = stats::range(&m.samples).expect("non-empty");
            let stock_arm = reference(arms, arm, Role::Stock).filter(|s| s.name != arm.name);
            let stock = stock_arm.and_then(|s| merged(s, key));
            let host = reference(arms, arm, Role::Host)
                .filter(|h| h.name != arm.name)
                .and_then(|h| merged(h, key));
            let cv = stats::coefficient_of_variation(&m.samples);
            let mut noise = Vec::new();
            if let Some(cv) = cv.filter(|cv| *cv > stats::CV_WARNING) {
                noise.push(warnings::samples_vary(cv));
            }
            let rounds: Vec<RoundStats> = m
                .rounds
                .iter()
                .map(|(round, v)| RoundStats {
                    round: *round,
                    median_ts: stats::median(v).expect("non-empty"),
                    samples: v.len(),
                })
                .collect();
            let round_medians: Vec<f64> = rounds.iter().map(|r| r.median_ts).collect();
            if let Some(drift) =
                stats::round_drift(&round_medians, median).filter(|d| *d > stats::DRIFT_WARNING)
            {
                // A host's processes ran in no round: numbered as processes, not rounds.
                let host = arm.role == Role::Host && !arm.randomized;
                let unit = merged_unit(arm, key);
                // A command's figures as its table shows them: a wall time of 0.0612 s is not
                // 0.06.
                let figure = |v: f64| crate::format::figure(v, unit.is_some());
                let each: Vec<String> = rounds
                    .iter()
                    .map(|r| match host {
                        true => format!("process {}: {}", r.round, figure(r.median_ts)),
                        false => format!("r{} {}", r.round, figure(r.median_ts)),
                    })
                    .collect();
                noise.push(warnings::rounds_drift(
                    drift,
                    &each,
                    unit.as_deref().unwrap_or("tokens/s"),
                    host,
                ));
            }
            if !noise.is_empty() {
                warnings.push(warnings::noisy(&arm.name, key, &noise));
            }
            let stock_median = stock.as_ref().and_then(|s| stats::median(&s.samples));
            // Rounds of another bench are not paired ([`across`]): a descriptive ratio only.
            // Schema 6: an arm that ran in none of the rounds of a stock arm that did (a host
            // baseline's processes, whatever role it now has): its round numbers pair nothing.
            let across_benches = stock_arm.is_some_and(|s| {
                !across::one_bench(arm, s) || (schema6 && !arm.randomized && s.randomized)
            });
            let paired = stock
                .as_ref()
                .filter(|_| !across_benches)
                .map(|s| pairs(&m, s, lower));
            let comparison = paired.as_deref().map(|p| {
                let mut c = interval::paired_ratio(p)?;
                if schema6 {
                    // Schema 6's hint: rounds for an 80% chance of the band, not a coin flip.
                    c.rounds_for_noise_band = interval::rounds_for_chance(
                        c.sd_log,
                        interval::NOISE,
                        interval::HINT_CHANCE,
                    );
                }
                Ok(c)
            });
            let ratio_of_medians = stock_median.map(|s| better(median, s));
            let spread = stock.as_ref().filter(|_| across_benches).and_then(|s| {
                let medians = |m: &Merged| -> Vec<f64> {
                    m.rounds
                        .iter()
                        .filter_map(|(_, v)| stats::median(v))
                        .collect()
                };
                if lower {
                    across::spread(&medians(s), &medians(&m))
                } else {
                    across::spread(&medians(&m), &medians(s))
                }
            });
            // Schema 6: the speedup is the paired rounds' estimate, the interval's own point.
            let paired_estimate = paired.as_deref().and_then(paired_estimate);
            if let (Some(Ok(_)), Some(s)) = (&comparison, stock_arm) {
                let by_design = arm.randomized && s.randomized && arm.group == s.group;
                if !by_design && !unrandomized.contains(&arm.name) {
                    unrandomized.push(arm.name.clone());
                    // Files given with --arm carry no record of how they ran; two bundles' arms
                    // ran in different benches.
                    let files = !arm.randomized || !s.randomized;
                    warnings.push(warnings::not_randomized(&arm.name, &s.name, files));
                }
            }
            let host_median = host.as_ref().and_then(|h| stats::median(&h.samples));
            // Schema 6: the arm's rounds against the host's processes ([`host`]).
            let host_percent =
                host.as_ref()
                    .zip(host_median)
                    .filter(|_| schema6)
                    .and_then(|(h, host_median)| {
                        let process_medians = |m: &Merged| -> Vec<f64> {
                            m.rounds
                                .iter()
                                .filter_map(|(_, v)| stats::median(v))
                                .collect()
                        };
                        host::percent_of_host(
                            &process_medians(&m),
                            &process_medians(h),
                            median,
                            host_median,
                        )
                    });
            cells.push((
                arm.name.clone(),
                Some(ArmStats {
                    median_ts: median,
                    min_ts: min,
                    max_ts: max,
                    samples: m.samples.len(),
                    speedup_vs_stock: if schema6 && !across_benches {
                        paired_estimate
                    } else {
                        ratio_of_medians
                    },
                    percent_of_host: match &host_percent {
                        Some(p) => Some(p.percent),
                        // 100 × arm / host in this order, as schema 5 derived it (byte for byte).
                        None => host_median.map(|h| {
                            if lower {
                                100.0 * h / median
                            } else {
                                100.0 * median / h
                            }
                        }),
                    },
                    percent_of_host_ci95: host_percent.as_ref().and_then(|p| p.ci95),
                    percent_of_host_basis: host_percent.map(|p| p.basis),
                    speedup_ci95: comparison
                        .as_ref()
                        .and_then(|c| c.as_ref().ok())
                        .map(|p| p.interval),
                    // Schema 6 reads verdicts family-wise, once every interval is known.
                    verdict: comparison
                        .as_ref()
                        .and_then(|c| c.as_ref().ok())
                        .filter(|_| !schema6)
                        .map(|p| interval::verdict(&p.interval)),
                    speedup_precision: comparison.as_ref().and_then(|c| c.as_ref().ok()).copied(),
                    speedup_no_interval: comparison
                        .as_ref()
                        .and_then(|c| c.as_ref().err())
                        .map(NoInterval::text)
                        .or_else(|| {
                            stock_arm
                                .filter(|_| across_benches)
                                .map(|s| across::note(&s.name, spread))
                        }),
                    ratio_of_medians: ratio_of_medians.filter(|_| schema6),
                    speedup_spread: spread,
                    // Schema 5 bundles did not derive it: their files must come out unchanged.
                    ms_per_token_over_host: host_median
                        .filter(|_| schema6 || !arm.randomized)
                        .and_then(|h| across::ms_per_token_over_host(key, median, h)),
                    verdict_basis: None,
                    carryover: None,
                    unequal_durations: None,
                    round_ratios: paired.filter(|_| schema6).map(|p| {
                        p.iter()
                            .map(|p| RoundRatio {
                                round: p.round,
                                ratio: p.arm / p.reference,
                            })
                            .collect()
                    }),
                    cv,
                    rounds,
                    samples_ts: m.samples.clone(),
                }),
            ));
        }
        // Each model measured in this row, once, in display order: arms of several bundles
        // may have measured different models, and each is named.
        let mut labels: Vec<String> = Vec::new();
        for (arm, cell) in order.iter().zip(&cells) {
            if cell.1.is_none() {
                continue;
            }
            if let Some((_, m)) = models.iter().find(|(n, _)| *n == arm.name) {
                let label = m.label();
                if !labels.contains(&label) {
                    labels.push(label);
                }
            }
        }
        let model = labels.join(", ");
        let unit = order.iter().find_map(|a| merged_unit(a, key));
        rows.push(Row {
            test: key.name(),
            unit,
            quantity: key.quantity,
            n_prompt: key.n_prompt,
            n_gen: key.n_gen,
            n_depth: key.n_depth,
            model,
            arms: Ordered(cells),
        });
    }
    rows
}

/// The Hodges–Lehmann estimate of the ratio from paired rounds (any number, at least one),
/// the point the interval is built around; `None` without a positive finite ratio in every
/// round.
fn paired_estimate(pairs: &[RoundPair]) -> Option<f64> {
    let mut d: Vec<f64> = pairs.iter().map(|p| (p.arm / p.reference).ln()).collect();
    if d.is_empty() || d.iter().any(|x| !x.is_finite()) {
        return None;
    }
    d.sort_by(f64::total_cmp);
    Some(interval::hodges_lehmann(&d).exp())
}
