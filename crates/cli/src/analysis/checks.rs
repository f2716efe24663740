//! Schema 6's checks of a bench's design, from its processes in the order run: each arm's
//! carry-over per test ([`design::carryover`]) and whether unequal process durations make an
//! interval's level approximate ([`design::unequal_durations`]); warnings where the evidence
//! says they matter.

use super::design::{self, Slot};
use super::input::{ArmInput, ProcessRun, Role};
use super::summary::{Ordered, Row};
use super::{stats, warnings};

/// Fills `carryover` and `unequal_durations` of the cells of `rows` from `sequences` (per
/// bench, its processes in run order), adds the warnings, and returns each arm's median
/// process duration in seconds (arms without recorded durations left out).
pub fn apply(
    rows: &mut [Row],
    arms: &[ArmInput],
    sequences: &[Vec<ProcessRun>],
    warnings: &mut Vec<String>,
) -> Ordered<f64> {
    let mut durations = Vec::new();
    let mut carried = Vec::new();
    for sequence in sequences {
        let mut names: Vec<&str> = Vec::new();
        for p in sequence {
            if !names.contains(&p.arm.as_str()) {
                names.push(&p.arm);
            }
        }
        let role = |name: &str| arms.iter().find(|a| a.name == name).map(|a| a.role);
        let Some(stock) = names.iter().position(|n| role(n) == Some(Role::Stock)) else {
            continue;
        };
        // Index 0 is stock, the others follow in order of first appearance.
        let stock_name = names.remove(stock);
        names.insert(0, stock_name);
        let index = |name: &str| names.iter().position(|n| *n == name);
        let seconds: Vec<Option<f64>> = names
            .iter()
            .map(|n| {
                let s: Vec<f64> = sequence
                    .iter()
                    .filter(|p| p.arm == *n)
                    .filter_map(|p| p.seconds)
                    .collect();
                stats::median(&s)
            })
            .collect();
        for (name, s) in names.iter().zip(&seconds) {
            if let Some(s) = s {
                durations.push((name.to_string(), *s));
            }
        }
        let mut scattered: Vec<Vec<String>> = vec![Vec::new(); names.len()];
        for row in rows.iter_mut() {
            let median_of = |name: &str, round: u32| {
                row.arms
                    .get(name)
                    .and_then(Option::as_ref)
                    .and_then(|s| s.rounds.iter().find(|r| r.round == round))
                    .map(|r| r.median_ts.ln())
                    // Where lower is better, the log of a speed: the estimate keeps its sign.
                    .map(|l| {
                        if row.quantity.lower_is_better() {
                            -l
                        } else {
                            l
                        }
                    })
            };
            let slots: Vec<Slot> = sequence
                .iter()
                .filter_map(|p| {
                    Some(Slot {
                        arm: index(&p.arm)?,
                        round: p.round,
                        log_median: median_of(&p.arm, p.round),
                    })
                })
                .collect();
            let fits = design::carryover(&slots, names.len());
            for (i, name) in names.iter().enumerate().skip(1) {
                let Some(Some(cell)) = row
                    .arms
                    .0
                    .iter_mut()
                    .find(|(n, _)| n == name)
                    .map(|(_, c)| c)
                else {
                    continue;
                };
                cell.carryover = fits[i - 1];
                if let Some(c) = fits[i - 1].filter(design::CarryOver::matters) {
                    carried.push(format!(
                        "{name} {} {:+.1}% [{:+.1}% {:+.1}%]",
                        row.test,
                        c.estimate * 100.0,
                        c.low * 100.0,
                        c.high * 100.0
                    ));
                }
                if let (Some(a), Some(s), Some(p)) =
                    (seconds[i], seconds[0], cell.speedup_precision)
                {
                    let flag = design::unequal_durations(a, s, p.sd_log);
                    cell.unequal_durations = Some(flag);
                    if flag {
                        scattered[i].push(format!("{} {:.0}%", row.test, p.sd_log * 100.0));
                    }
                }
            }
        }
        for (i, tests) in scattered.iter().enumerate() {
            if let (false, Some(a), Some(s)) = (tests.is_empty(), seconds[i], seconds[0]) {
                warnings.push(warnings::unequal_durations(
                    names[i],
                    a.max(s) / a.min(s),
                    (a, s),
                    tests,
                ));
            }
        }
    }
    if !carried.is_empty() {
        warnings.push(warnings::carryover_matters(&carried));
    }
    Ordered(durations)
}
