//! Successive halving: how `capshim tune` spends its budget on candidates.
//!
//! Every stage runs rounds in which the reference and every candidate still in the race run
//! once each, in random order (the driver draws it); a candidate's figure per round is its log
//! ratio to the reference in the same round (natural log of candidate / reference throughput).
//!
//! **The schedule.** A stage with `a` candidates alive is planned to cost an equal share of
//! what is left: the halvings still to come from `a` to one candidate, plus a last stage for
//! that one, are `⌈log₂ a⌉ + 1` stages, and this stage gets `processes_left / (⌈log₂ a⌉ + 1)`
//! processes, `rounds = share / (a + 1)`. So rounds per stage grow as candidates halve (with
//! 450 processes and 8 candidates: 9, 24, 41 and 63 rounds for 8, 4, 2 and 1 candidates with
//! tune's first stage of 9 rounds ([`Config::for_candidates`]), 6, 26, 44 and 67 with one of 6,
//! when the first stage is planned before the budget's cost per process is known). Before any
//! process ran the driver passes `usize::MAX` and the stage gets [`Config::first_rounds`].
//! After a stage that ran all its rounds, the better half (`⌈a / 2⌉`, by the Hodges–Lehmann
//! estimate of all their rounds so far) continues; one candidate left keeps running while the
//! budget lasts, its rounds tightening the interval its winner test reads.
//!
//! **First stages.** A candidate with fewer than `first_rounds` rounds (a new one, or one
//! whose first stage was cut short) is in its first stage: the stage that holds it has at least
//! the rounds it lacks, even when that costs more than `processes_left` (as long as one round
//! fits: with less than one round's processes left the search is over). The driver then stops
//! the stage when the budget is spent and records the rounds that ran; such a stage halves
//! nothing, and a candidate left below [`MIN_ROUNDS`] rounds has no interval and cannot win.
//! So a budget too small for even the first stage ends honestly: estimates from the rounds
//! that ran, no interval, no winner.
//!
//! **The winner.** Each candidate's signed-rank interval of the ratio, from all its rounds, is
//! read at the Bonferroni level `1 − 0.05 / m`, `m` the candidates that ran at least one round
//! ([`winner_level`]). The winner is the candidate with the best estimate among those that
//! stayed to the end whose interval lies wholly above `1 + band`; if none, there is no winner
//! ("no setting beats the reference here").
//!
//! Why this level and not one over the last stage's candidates alone: the finalists are the
//! ones that looked best, so their early rounds are biased upward, and the winner test reads
//! those rounds too. In a trial of 500 searches among 8 candidates all exactly at the band's
//! edge (1.02), a level over the last stage (95% for one finalist) declared a winner 6.4% of
//! the time, more than the 2.5% a one-sided miss of a 95% interval allows, and this rule 1.2%;
//! reading only the rounds after the last selection would make the level exact, but found a
//! planted 3% winner 71% of the time in that trial, against 85% for this rule. The calibration
//! (`tune::calibration`) measures the rule's rates and asserts them; docs/tune.md gives them.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use crate::analysis::family::verdict_level;
use crate::analysis::interval::{Interval, MIN_ROUNDS, hodges_lehmann, walsh_bounds};
use crate::analysis::ranks::critical_value;

/// How a search is set up.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Config {
    /// Rounds every candidate runs in its first stage: at least
    /// [`crate::analysis::interval::MIN_ROUNDS`] (6).
    pub first_rounds: usize,
    /// The noise band a winner's interval must lie wholly above, a fraction (0.02: the
    /// interval's low end must exceed 1.02).
    pub band: f64,
}

impl Default for Config {
    /// `capshim tune`'s: a first stage of [`MIN_ROUNDS`] rounds, the noise band of bench's
    /// verdicts ([`crate::analysis::interval::NOISE`], 0.02).
    fn default() -> Config {
        Config {
            first_rounds: MIN_ROUNDS,
            band: crate::analysis::interval::NOISE,
        }
    }
}

impl Config {
    /// `capshim tune`'s for a search that starts with `candidates` candidates: a first stage
    /// of the rounds an interval needs at the winner rule's level for them
    /// ([`crate::analysis::family::rounds_for_level`] of [`winner_level`]), at least
    /// [`MIN_ROUNDS`]: 6 for one candidate, 9 for 7 to 12. So a budget that pays for the first
    /// stage alone can already find a winner.
    pub fn for_candidates(candidates: usize) -> Config {
        Config {
            first_rounds: crate::analysis::family::rounds_for_level(winner_level(candidates))
                .max(MIN_ROUNDS),
            ..Config::default()
        }
    }
}

/// One stage the driver is to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stage {
    /// 1-based stage number.
    pub number: usize,
    /// The candidates (indices into the search's candidates) that run in it.
    pub alive: Vec<usize>,
    /// How many more rounds to run; each round runs the reference and every alive candidate
    /// once, so a stage costs `rounds × (alive.len() + 1)` processes.
    pub rounds: usize,
}

impl Stage {
    /// What the stage costs in processes: `rounds × (alive.len() + 1)`.
    pub fn processes(&self) -> usize {
        self.rounds.saturating_mul(self.alive.len() + 1)
    }
}

/// Where a candidate ended.
#[derive(Clone, Debug, PartialEq)]
pub struct Ranked {
    /// The candidate's index.
    pub candidate: usize,
    /// Rounds it ran against the reference.
    pub rounds: usize,
    /// Hodges–Lehmann estimate of candidate / reference (a ratio; `None` without rounds).
    pub estimate: Option<f64>,
    /// The interval its winner test read (a ratio), `None` below the rounds it needs. For a
    /// candidate eliminated earlier, its interval at the same level, for the reader.
    pub interval: Option<crate::analysis::interval::Interval>,
    /// The stage it was eliminated after, `None` when it stayed to the end.
    pub eliminated_after: Option<usize>,
}

/// What a search found.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// Every candidate, best first: the winner, then the candidates that stayed to the end by
    /// estimate, then the eliminated ones, the later eliminated first, then those that never
    /// ran.
    pub ranking: Vec<Ranked>,
    /// The winner (an index), or `None`: no candidate beats the reference beyond the band.
    pub winner: Option<usize>,
}

/// The level of the winner test's intervals when `tested` candidates ran at least one round:
/// `1 − 0.05 / tested` (Bonferroni; 0.95 for one, 0.99375 for eight).
pub fn winner_level(tested: usize) -> f64 {
    verdict_level(tested)
}

/// [`critical_value`] remembered: its exact count costs `n²` steps, and a search (and the
/// calibration's thousands of searches) asks again for the same few round counts.
fn critical(n: usize, level: f64) -> Option<(u64, f64)> {
    type Memo = HashMap<(usize, u64), Option<(u64, f64)>>;
    static MEMO: OnceLock<Mutex<Memo>> = OnceLock::new();
    let memo = MEMO.get_or_init(|| Mutex::new(HashMap::new()));
    let key = (n, level.to_bits());
    if let Some(known) = memo.lock().map_or(None, |m| m.get(&key).copied()) {
        return known;
    }
    let value = critical_value(n, level);
    if let Ok(mut m) = memo.lock() {
        m.insert(key, value);
    }
    value
}

/// A successive-halving search over `candidates` candidates.
#[derive(Clone, Debug)]
pub struct Halving {
    config: Config,
    /// Per candidate, its log ratios in the order recorded.
    logs: Vec<Vec<f64>>,
    /// Per candidate, the stage it was eliminated after.
    eliminated: Vec<Option<usize>>,
    /// Stages recorded so far.
    stages: usize,
}

impl Halving {
    /// A search over `candidates` candidates (indices `0..candidates`).
    ///
    /// # Panics
    /// If `config.first_rounds` is below [`MIN_ROUNDS`] (a programming error: no interval
    /// could ever be read from such a first stage alone).
    pub fn new(candidates: usize, config: Config) -> Halving {
        assert!(
            config.first_rounds >= MIN_ROUNDS,
            "a first stage of {} rounds is below the {MIN_ROUNDS} an interval needs",
            config.first_rounds
        );
        Halving {
            config,
            logs: vec![Vec::new(); candidates],
            eliminated: vec![None; candidates],
            stages: 0,
        }
    }

    /// Adds `count` candidates (for example combinations of the best single knobs) that join
    /// at the next stage with a first stage of their own; returns their indices.
    pub fn add(&mut self, count: usize) -> std::ops::Range<usize> {
        let start = self.logs.len();
        self.logs.resize(start + count, Vec::new());
        self.eliminated.resize(start + count, None);
        start..start + count
    }

    /// The next stage to run, given the processes the budget still allows (the driver's
    /// estimate: time left / seconds per process so far, `usize::MAX` before any process ran);
    /// `None` when the search is over. The driver should leave out of `processes_left` what it
    /// keeps for other work (the winner's verify). See the module documentation for the
    /// schedule and for the one case a stage may cost more than `processes_left`.
    pub fn next_stage(&self, processes_left: usize) -> Option<Stage> {
        let alive: Vec<usize> = (0..self.logs.len())
            .filter(|&c| self.eliminated[c].is_none())
            .collect();
        // Not even one round affordable: over, whatever is still in its first stage.
        if alive.is_empty() || processes_left < alive.len() + 1 {
            return None;
        }
        let first = alive
            .iter()
            .map(|&c| self.config.first_rounds.saturating_sub(self.logs[c].len()))
            .max()
            .unwrap_or(0);
        let planned = if processes_left == usize::MAX {
            self.config.first_rounds
        } else {
            let stages_left = alive.len().next_power_of_two().trailing_zeros() as usize + 1;
            processes_left / stages_left / (alive.len() + 1)
        };
        let rounds = planned.max(first);
        (rounds > 0).then(|| Stage {
            number: self.stages + 1,
            alive,
            rounds,
        })
    }

    /// Records a stage's rounds: `logs[i]` holds the log ratios of `stage.alive[i]` for the
    /// rounds that ran (fewer than `stage.rounds` when the budget ran out mid-stage; a round
    /// whose run of that candidate or of the reference failed gives it no ratio). A stage that
    /// ran all its rounds (some candidate has them all) then keeps the better half of its
    /// candidates.
    ///
    /// # Panics
    /// If `logs` does not match `stage.alive`, or holds more than `stage.rounds` rounds or a
    /// value that is not finite (the driver's error: a failed run has no ratio).
    pub fn record(&mut self, stage: &Stage, logs: &[Vec<f64>]) {
        assert_eq!(
            stage.alive.len(),
            logs.len(),
            "one list of ratios per candidate"
        );
        for (&c, l) in stage.alive.iter().zip(logs) {
            assert!(
                l.len() <= stage.rounds,
                "more rounds than the stage planned"
            );
            assert!(l.iter().all(|x| x.is_finite()), "a log ratio is not finite");
            self.logs[c].extend_from_slice(l);
        }
        self.stages = self.stages.max(stage.number);
        // The stage ran all its rounds when some candidate has them all: a run that failed
        // (recorded with --keep-going) leaves its candidate one ratio short, a budget spent
        // mid-stage leaves every candidate short.
        let complete = logs.iter().any(|l| l.len() == stage.rounds);
        if !complete || stage.alive.len() < 2 {
            return;
        }
        let mut order: Vec<(usize, f64)> = stage
            .alive
            .iter()
            .map(|&c| (c, self.log_estimate(c)))
            .collect();
        // Best first; ties keep the candidates' order, so a replay gives the same ranking.
        order.sort_by(|a, b| b.1.total_cmp(&a.1));
        for &(c, _) in &order[stage.alive.len().div_ceil(2)..] {
            self.eliminated[c] = Some(stage.number);
        }
    }

    /// The log ratios recorded for `candidate`, in the order recorded (for the bundle).
    pub fn logs(&self, candidate: usize) -> &[f64] {
        &self.logs[candidate]
    }

    /// The Hodges–Lehmann estimate of a candidate's log ratio; −∞ without rounds.
    fn log_estimate(&self, candidate: usize) -> f64 {
        let mut d = self.logs[candidate].clone();
        if d.is_empty() {
            return f64::NEG_INFINITY;
        }
        d.sort_by(f64::total_cmp);
        hodges_lehmann(&d)
    }

    /// The outcome from every round recorded so far (also after a stage cut short).
    pub fn outcome(&self) -> Outcome {
        let tested = self.logs.iter().filter(|l| !l.is_empty()).count();
        let level = winner_level(tested);
        let mut ranking: Vec<Ranked> = (0..self.logs.len())
            .map(|c| {
                let mut d = self.logs[c].clone();
                d.sort_by(f64::total_cmp);
                let interval = critical(d.len(), level).map(|(k, _)| {
                    let (low, high) = walsh_bounds(&d, k);
                    Interval {
                        level,
                        low: low.exp(),
                        high: high.exp(),
                    }
                });
                Ranked {
                    candidate: c,
                    rounds: d.len(),
                    estimate: (!d.is_empty()).then(|| hodges_lehmann(&d).exp()),
                    interval,
                    eliminated_after: self.eliminated[c],
                }
            })
            .collect();
        // Stayed to the end (with rounds) before eliminated later before eliminated earlier
        // before never ran; within each, the better estimate first.
        let tier = |r: &Ranked| match (r.estimate, r.eliminated_after) {
            (None, _) => 0,
            (Some(_), None) => usize::MAX,
            (Some(_), Some(stage)) => stage,
        };
        ranking.sort_by(|a, b| {
            tier(b).cmp(&tier(a)).then(
                b.estimate
                    .unwrap_or(0.0)
                    .total_cmp(&a.estimate.unwrap_or(0.0)),
            )
        });
        let winner = ranking
            .iter()
            .position(|r| {
                r.eliminated_after.is_none()
                    && r.interval.is_some_and(|i| i.low > 1.0 + self.config.band)
            })
            .map(|at| {
                let won = ranking.remove(at);
                let c = won.candidate;
                ranking.insert(0, won);
                c
            });
        Outcome { ranking, winner }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Log ratios for `rounds` rounds around `ratio`, spread ±1% in a fixed pattern.
    fn around(ratio: f64, rounds: usize) -> Vec<f64> {
        (0..rounds)
            .map(|i| ratio.ln() + 0.01 * ((i * 7 % 5) as f64 - 2.0) / 2.0)
            .collect()
    }

    /// Runs `stage` in full with each candidate at `ratios[candidate]`.
    fn run(h: &mut Halving, stage: &Stage, ratios: &[f64]) {
        let logs: Vec<Vec<f64>> = stage
            .alive
            .iter()
            .map(|&c| around(ratios[c], stage.rounds))
            .collect();
        h.record(stage, &logs);
    }

    const EIGHT: [f64; 8] = [1.005, 0.99, 1.01, 1.06, 1.0, 0.97, 1.02, 0.98];

    #[test]
    fn eight_candidates_halve_to_one_within_450_processes() {
        let mut h = Halving::new(8, Config::default());
        let mut left = 450;
        let mut shapes = Vec::new();
        let mut first = true;
        while let Some(stage) = h.next_stage(if first { usize::MAX } else { left }) {
            first = false;
            assert!(stage.processes() <= left, "{stage:?} with {left} left");
            shapes.push((stage.number, stage.alive.len(), stage.rounds));
            left -= stage.processes();
            run(&mut h, &stage, &EIGHT);
        }
        // Rounds grow as the candidates halve; the last one runs what is left.
        assert_eq!(shapes, [(1, 8, 6), (2, 4, 26), (3, 2, 44), (4, 1, 67)]);
        assert!(left < 2, "{left} processes left unspent");
        let o = h.outcome();
        assert_eq!(o.winner, Some(3));
        let best = &o.ranking[0];
        assert_eq!((best.candidate, best.rounds), (3, 143));
        assert_eq!(best.eliminated_after, None);
        let i = best.interval.unwrap();
        assert_eq!(i.level, winner_level(8));
        assert!(i.low > 1.02 && i.high < 1.10, "{i:?}");
        // Eliminations: four after stage 1, two after stage 2, one after stage 3, in the
        // ranking after the finalist, later eliminations first.
        let after: Vec<Option<usize>> = o.ranking.iter().map(|r| r.eliminated_after).collect();
        let mut sorted = after.clone();
        sorted.sort_by(|a, b| {
            b.map_or(usize::MAX, |s| s)
                .cmp(&a.map_or(usize::MAX, |s| s))
        });
        assert_eq!(after, sorted);
        let count = |s: usize| after.iter().filter(|&&a| a == Some(s)).count();
        assert_eq!((count(1), count(2), count(3)), (4, 2, 1));
        // The worst four went first.
        for c in [1, 4, 5, 7] {
            let r = o.ranking.iter().find(|r| r.candidate == c).unwrap();
            assert_eq!((r.eliminated_after, r.rounds), (Some(1), 6), "{c}");
        }
    }

    #[test]
    fn tune_s_first_stage_reaches_the_winner_level_so_it_alone_can_find_a_winner() {
        assert_eq!(Config::for_candidates(1).first_rounds, 6);
        assert_eq!(Config::for_candidates(7).first_rounds, 9);
        assert_eq!(Config::for_candidates(13).first_rounds, 10);
        let mut h = Halving::new(8, Config::for_candidates(8));
        let stage = h.next_stage(usize::MAX).unwrap();
        assert_eq!(stage.rounds, 9);
        // Only the first stage runs (the budget ends there): the faster one wins.
        run(&mut h, &stage, &EIGHT);
        let outcome = h.outcome();
        assert_eq!(outcome.winner, Some(3), "{outcome:?}");
        // With a first stage of 6, the same budget gives no interval at all.
        let mut h = Halving::new(8, Config::default());
        let stage = h.next_stage(usize::MAX).unwrap();
        run(&mut h, &stage, &EIGHT);
        assert!(h.outcome().ranking.iter().all(|r| r.interval.is_none()));
    }

    #[test]
    fn no_stage_after_the_first_costs_more_than_the_budget_left() {
        for candidates in 1..=13 {
            for budget in [10, 30, 60, 100, 200, 450, 1000] {
                let ratios: Vec<f64> = (0..candidates).map(|c| 1.0 + 0.01 * c as f64).collect();
                let mut h = Halving::new(candidates, Config::default());
                let mut left = budget;
                let mut stages = 0;
                while let Some(stage) = h.next_stage(if stages == 0 { usize::MAX } else { left }) {
                    assert!(stage.rounds >= 1);
                    let affordable = left / (stage.alive.len() + 1);
                    if stages > 0 && stage.alive.iter().all(|&c| h.logs(c).len() >= 6) {
                        assert!(stage.processes() <= left, "{candidates} {budget} {stage:?}");
                    }
                    let ran = stage.rounds.min(affordable);
                    let logs: Vec<Vec<f64>> = stage
                        .alive
                        .iter()
                        .map(|&c| around(ratios[c], ran))
                        .collect();
                    h.record(&stage, &logs);
                    left -= ran * (stage.alive.len() + 1);
                    stages += 1;
                    assert!(stages < 100, "the search ends");
                }
                let o = h.outcome();
                assert_eq!(o.ranking.len(), candidates);
                // A winner always has its interval and stayed to the end.
                if let Some(w) = o.winner {
                    let r = &o.ranking[0];
                    assert_eq!(r.candidate, w);
                    assert!(r.interval.unwrap().low > 1.02 && r.eliminated_after.is_none());
                }
            }
        }
    }

    #[test]
    fn added_candidates_get_a_first_stage_of_their_own() {
        let mut h = Halving::new(4, Config::default());
        let stage = h.next_stage(usize::MAX).unwrap();
        assert_eq!((stage.alive.len(), stage.rounds), (4, 6));
        run(&mut h, &stage, &[1.03, 1.0, 1.04, 0.99, 1.08, 1.05]);
        assert_eq!(h.add(2), 4..6);
        // Survivors 0 and 2, and the two new ones; 40 processes would pay for 2 rounds of
        // five processes at an equal share, but the new ones need 6.
        let stage = h.next_stage(40).unwrap();
        assert_eq!(stage.alive, [0, 2, 4, 5]);
        assert_eq!(stage.rounds, 6);
        run(&mut h, &stage, &[1.03, 1.0, 1.04, 0.99, 1.08, 1.05]);
        assert_eq!(h.logs(4).len(), 6);
        assert_eq!(h.logs(0).len(), 12);
        // The better half of the four: the new 1.08 and 1.05.
        let stage = h.next_stage(300).unwrap();
        assert_eq!(stage.alive, [4, 5]);
        assert_eq!(stage.number, 3);
        // Less than one round's processes: over.
        assert_eq!(h.next_stage(2), None);
    }

    #[test]
    fn a_stage_cut_short_halves_nothing_and_its_outcome_is_honest() {
        let mut h = Halving::new(3, Config::default());
        let stage = h.next_stage(usize::MAX).unwrap();
        // The budget ran out after 4 of 6 rounds: estimates, but no interval and no winner.
        let logs: Vec<Vec<f64>> = [1.2, 1.0, 0.9].iter().map(|&r| around(r, 4)).collect();
        h.record(&stage, &logs);
        let o = h.outcome();
        assert_eq!(o.winner, None);
        assert_eq!(o.ranking[0].candidate, 0);
        for r in &o.ranking {
            assert_eq!((r.rounds, r.interval, r.eliminated_after), (4, None, None));
            assert!(r.estimate.is_some());
        }
        // Resumed, the first stage asks for the 2 rounds it lacks, even beyond the budget.
        let next = h.next_stage(8).unwrap();
        assert_eq!((next.alive.len(), next.rounds), (3, 2));
        assert!(next.processes() == 8);
        let next = h.next_stage(4).unwrap();
        assert_eq!(next.rounds, 2);
        assert!(next.processes() > 4);
    }

    #[test]
    fn a_failed_run_does_not_stop_the_halving() {
        let mut h = Halving::new(4, Config::default());
        let stage = h.next_stage(usize::MAX).unwrap();
        let mut logs: Vec<Vec<f64>> = [1.05, 1.0, 0.98, 1.03]
            .iter()
            .map(|&r| around(r, 6))
            .collect();
        // Candidate 1's run failed in one round (--keep-going): five ratios.
        logs[1].pop();
        h.record(&stage, &logs);
        let next = h.next_stage(200).unwrap();
        assert_eq!(next.alive, [0, 3]);
        assert_eq!(h.outcome().ranking[3].eliminated_after, Some(1));
    }

    #[test]
    fn a_winner_clears_the_band_not_just_one() {
        // 4% faster but spread widely: its interval reaches below 1.02.
        let mut h = Halving::new(1, Config::default());
        let stage = h.next_stage(usize::MAX).unwrap();
        let wide: Vec<f64> = (0..6)
            .map(|i| 1.04f64.ln() + 0.03 * (i as f64 - 2.5))
            .collect();
        h.record(&stage, &[wide]);
        let o = h.outcome();
        let r = &o.ranking[0];
        assert!(
            r.estimate.unwrap() > 1.03 && r.interval.unwrap().low < 1.02,
            "{r:?}"
        );
        assert_eq!(o.winner, None);
        // The same centre, tightly: a winner.
        let mut h = Halving::new(1, Config::default());
        h.record(&stage, &[around(1.04, 6)]);
        assert_eq!(h.outcome().winner, Some(0));
    }

    #[test]
    fn the_winner_is_the_best_finalist_that_clears_the_band() {
        // The budget ends inside a stage of two finalists, after 8 of its 10 rounds, and 3 of
        // candidate 0's runs failed: the better estimate has too few rounds for an interval,
        // the other clears the band and wins.
        let mut h = Halving::new(2, Config::default());
        let stage = Stage {
            number: 1,
            alive: vec![0, 1],
            rounds: 10,
        };
        h.record(&stage, &[around(1.10, 5), around(1.05, 8)]);
        let o = h.outcome();
        assert_eq!(o.winner, Some(1));
        assert_eq!(o.ranking[0].candidate, 1);
        assert_eq!(o.ranking[1].interval, None);
        assert_eq!(o.ranking[1].eliminated_after, None);
    }
}
