//! The order in which arms run: every round runs each arm once, in an order drawn at random for
//! that round (a uniform shuffle from an unpredictable generator). Which arm runs first in a
//! round is then a fair coin that nothing about the machine can follow: drift, a periodic
//! disturbance, a neighbour that lingers from one process into the next or a burst of slow
//! processes lands on either arm alike, and the interval (`analysis::interval`) owes its level
//! to exactly that. A fixed pattern (AB AB BA BA, ABBA) could fall in step with a disturbance of
//! the machine and hand one arm its slow slots for a whole bench.
//!
//! [`run_rounds`] runs every slot in that order, with a progress bar (or a line a run where
//! stderr is not a terminal), pausing [`Context::cooldown`] between one process and the next
//! (`--cooldown`), stopping before the next run when a signal came (also during a pause).

use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use rand::Rng;
use rand::seq::SliceRandom;

use super::Context;
use super::error::ExperimentError;

/// One run of one arm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    /// 1-based round number.
    pub round: u32,
    /// Index of the arm in the arm list.
    pub arm: usize,
}

/// Every run of `arms` arms over `rounds` rounds, each round in its own random order drawn
/// from `rng`. Made one round at a time, so that any number of rounds costs no memory up front.
pub fn interleave<R: Rng>(arms: usize, rounds: u32, mut rng: R) -> impl Iterator<Item = Slot> {
    (1..=rounds).flat_map(move |round| {
        let mut order: Vec<usize> = (0..arms).collect();
        order.shuffle(&mut rng);
        order.into_iter().map(move |arm| Slot { round, arm })
    })
}

/// The longest stretch a cooldown sleeps before it looks for a signal again.
const SIGNAL_CHECK: Duration = Duration::from_millis(100);

/// Waits `cooldown`, looking for a signal at least every [`SIGNAL_CHECK`].
///
/// # Errors
/// [`ExperimentError::Interrupted`] as soon as a signal came.
fn pause(cx: &Context, cooldown: Duration) -> Result<(), ExperimentError> {
    // A signal that came before the pause came while a process ran, and was passed on to it.
    cx.check_signals()?;
    let end = Instant::now() + cooldown;
    loop {
        if let Some(number) = cx.signals.received() {
            return Err(ExperimentError::interrupted_in_pause(&cx.words, number));
        }
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(());
        }
        std::thread::sleep(left.min(SIGNAL_CHECK));
    }
}

/// Runs `one` for every slot of `arms` (their names) over `rounds` rounds, each round in a
/// random order, [`Context::cooldown`] apart; progress on stderr.
///
/// # Errors
/// [`ExperimentError::Interrupted`] when a signal came before a run; whatever `one` returns.
pub fn run_rounds(
    cx: &mut Context,
    arms: &[String],
    rounds: u32,
    mut one: impl FnMut(&mut Context, Slot) -> Result<(), ExperimentError>,
) -> Result<(), ExperimentError> {
    cx.progress.total = arms.len() as u64 * u64::from(rounds);
    let bar = ProgressBar::new(cx.progress.total);
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} runs  {msg}  ETA {eta}",
        )
        .expect("valid template"),
    );
    for (i, slot) in interleave(arms.len(), rounds, rand::rng()).enumerate() {
        // Between processes, not before the first: what one process leaves behind fades
        // before the next starts, whichever arm it is.
        let waited = if i > 0 && !cx.cooldown.is_zero() {
            bar.set_message(format!("cooling down {:.1} s", cx.cooldown.as_secs_f64()));
            pause(cx, cx.cooldown)
        } else {
            Ok(())
        };
        if let Err(e) = waited.and_then(|()| cx.check_signals()) {
            bar.finish_and_clear();
            return Err(e);
        }
        let message = format!("arm {}, round {}/{rounds}", arms[slot.arm], slot.round);
        bar.set_message(message.clone());
        if bar.is_hidden() {
            crate::term::line(format!("capshim: {}: {message}", cx.words.command));
        }
        one(cx, slot).inspect_err(|_| bar.finish_and_clear())?;
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    fn orders(arms: usize, rounds: u32, seed: u64) -> Vec<Vec<usize>> {
        let slots: Vec<Slot> = interleave(arms, rounds, StdRng::seed_from_u64(seed)).collect();
        slots
            .chunks(arms)
            .enumerate()
            .map(|(i, round)| {
                assert!(round.iter().all(|s| s.round == i as u32 + 1));
                round.iter().map(|s| s.arm).collect()
            })
            .collect()
    }

    #[test]
    fn every_round_runs_every_arm_once() {
        for arms in 1..5 {
            for order in orders(arms, 50, 1) {
                let mut sorted = order.clone();
                sorted.sort_unstable();
                assert_eq!(sorted, (0..arms).collect::<Vec<_>>());
            }
        }
        assert_eq!(interleave(2, 0, StdRng::seed_from_u64(1)).count(), 0);
    }

    #[test]
    fn which_arm_runs_first_is_a_fair_coin_independent_from_round_to_round() {
        // 4000 rounds of two arms: stock first in about half, and the same order as the
        // previous round in about half (a fixed pattern would give 1/2 and 0 or 1). The bounds
        // are 5 binomial standard deviations (0.79% each).
        let o = orders(2, 4000, 7);
        let first = o.iter().filter(|r| r[0] == 0).count() as f64 / 4000.0;
        let repeats = o.windows(2).filter(|w| w[0] == w[1]).count() as f64 / 3999.0;
        assert!((first - 0.5).abs() < 0.04, "stock first in {first}");
        assert!(
            (repeats - 0.5).abs() < 0.04,
            "same order again in {repeats}"
        );
        // Three arms: each of the 6 orders in about a sixth of 6000 rounds.
        let o = orders(3, 6000, 8);
        for perm in [
            [0, 1, 2],
            [0, 2, 1],
            [1, 0, 2],
            [1, 2, 0],
            [2, 0, 1],
            [2, 1, 0],
        ] {
            let share = o.iter().filter(|r| r[..] == perm).count() as f64 / 6000.0;
            assert!((share - 1.0 / 6.0).abs() < 0.025, "{perm:?} in {share}");
        }
        // Another generator state, another schedule.
        assert_ne!(orders(2, 64, 1), orders(2, 64, 2));
    }

    #[test]
    fn the_largest_round_count_costs_nothing_up_front() {
        // Building every slot of u32::MAX rounds first would need 2^33 slots of memory.
        let first: Vec<Slot> = interleave(2, u32::MAX, StdRng::seed_from_u64(3))
            .take(8)
            .collect();
        assert_eq!(first.len(), 8);
        assert_eq!(first[7].round, 4);
    }
}
