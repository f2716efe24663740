//! Successive halving: how `capshim tune` spends its budget on candidates.
//!
//! INTERFACE (written by the lead; the tune-search branch implements the bodies, the tune
//! branch drives it). Every stage runs rounds in which the reference and every candidate still
//! in the race run once each, in random order; a candidate's figure per round is its log
//! ratio to the reference in the same round (natural log of candidate / reference throughput).

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

/// Where a candidate ended.
#[derive(Clone, Debug, PartialEq)]
pub struct Ranked {
    /// The candidate's index.
    pub candidate: usize,
    /// Rounds it ran against the reference.
    pub rounds: usize,
    /// Hodges–Lehmann estimate of candidate / reference (a ratio; `None` without rounds).
    pub estimate: Option<f64>,
    /// The interval its winner test read (a ratio), `None` below the rounds it needs.
    pub interval: Option<crate::analysis::interval::Interval>,
    /// The stage it was eliminated after, `None` when it stayed to the end.
    pub eliminated_after: Option<usize>,
}

/// What a search found.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// Every candidate, best first.
    pub ranking: Vec<Ranked>,
    /// The winner (an index), or `None`: no candidate beats the reference beyond the band.
    pub winner: Option<usize>,
}

/// A successive-halving search over `candidates` candidates.
#[derive(Clone, Debug)]
pub struct Halving {
    // The tune-search branch owns the fields.
}

impl Halving {
    /// A search over `candidates` candidates (indices `0..candidates`).
    pub fn new(candidates: usize, config: Config) -> Halving {
        let _ = (candidates, config);
        todo!("tune-search branch")
    }

    /// Adds `count` candidates (for example combinations of the best single knobs) that join
    /// at the next stage with a first stage of their own; returns their indices.
    pub fn add(&mut self, count: usize) -> std::ops::Range<usize> {
        let _ = count;
        todo!("tune-search branch")
    }

    /// The next stage to run, given the processes the budget still allows (the driver's
    /// estimate: time left / seconds per process so far, `usize::MAX` before any process ran);
    /// `None` when the search is over.
    pub fn next_stage(&self, processes_left: usize) -> Option<Stage> {
        let _ = processes_left;
        todo!("tune-search branch")
    }

    /// Records a stage's rounds: `logs[i]` holds the log ratios of `stage.alive[i]` for the
    /// rounds that ran (fewer than `stage.rounds` when the budget ran out mid-stage).
    pub fn record(&mut self, stage: &Stage, logs: &[Vec<f64>]) {
        let _ = (stage, logs);
        todo!("tune-search branch")
    }

    /// The outcome from every round recorded so far (also after a stage cut short).
    pub fn outcome(&self) -> Outcome {
        todo!("tune-search branch")
    }
}
