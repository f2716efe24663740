//! The text of every warning [`analyze`](super::analyze) gives: what a reader must know
//! before trusting the figures, each naming the arm (and test) and what to do.

use super::stats;
use crate::llama::{ModelId, TestKey};

/// Two arms ran one test with different llama-bench settings.
pub fn settings_differ(
    key: TestKey,
    first_arm: &str,
    arm: &str,
    (field, a, b): (&str, &str, &str),
    asked: bool,
) -> String {
    if asked {
        // The arms' own bench-args set it: a comparison of settings, as asked.
        return format!(
            "test {key}: arm {first_arm} ran with {field} = {a} but arm {arm} with {field} = {b}, \
             as their bench-args ask: the speedup measures that setting together with the \
             profile, not the shim alone"
        );
    }
    format!(
        "test {key}: arm {first_arm} ran with {field} = {a} but arm {arm} with {field} = {b}: \
         the arms differ in more than the shim; rerun them with the same llama-bench options"
    )
}

/// An arm's interval against `stock` rests on rounds capshim cannot show ran side by side in
/// one `capshim bench`'s random order: files given with `--arm` (`files`: capshim cannot know
/// how they were run), or arms of two different bundles (which did not).
pub fn not_randomized(arm: &str, stock: &str, files: bool) -> String {
    let how = if files {
        format!(
            "capshim cannot know whether the rounds of {arm} and those of {stock} ran side by side \
             in one capshim bench's random order (files given with --arm carry no record of it)"
        )
    } else {
        format!(
            "arm {arm}: its rounds and those of {stock} ran in different capshim benches (another \
             bundle's stock arm), not side by side in one bench's random order"
        )
    };
    format!(
        "{}{how}, so its intervals hold only if each round's ratio scatters symmetrically and \
         independently around the true one; for an interval that holds by design, bench the arms \
         together with capshim bench",
        if files {
            format!("arm {arm}: ")
        } else {
            String::new()
        }
    )
}

/// Two arms measured different models.
pub fn different_models(arm: &str, model: &ModelId, first_arm: &str, first: &ModelId) -> String {
    format!(
        "arm {arm} measured {model} but arm {first_arm} measured {first}: \
         the comparison is between different models"
    )
}

/// Part of [`noisy`]: the samples' coefficient of variation `cv` is above
/// [`stats::CV_WARNING`].
pub fn samples_vary(cv: f64) -> String {
    format!(
        "samples vary by {:.1}% (coefficient of variation above {:.0}%)",
        cv * 100.0,
        stats::CV_WARNING * 100.0
    )
}

/// Part of [`noisy`]: the round medians (`each`, as `r1 12.34`, or for a host's processes
/// `process 1: 12.34`) spread by `drift` of the median, above [`stats::DRIFT_WARNING`]; `unit`
/// is the figures' (tokens/s, or a command's); `host` when they are a host's processes, which
/// ran in no round.
pub fn rounds_drift(drift: f64, each: &[String], unit: &str, host: bool) -> String {
    format!(
        "{} medians drift apart by {:.1}% ({} {unit})",
        if host { "host process" } else { "round" },
        drift * 100.0,
        each.join(", ")
    )
}

/// An arm's samples of one test are noisy, for the reasons given.
pub fn noisy(arm: &str, key: TestKey, reasons: &[String]) -> String {
    format!(
        "arm {arm}, {key}: {}: another workload may have been running; rerun on a quiet machine",
        reasons.join(" and ")
    )
}

/// ggml-metal reported other capabilities in a later round than in the first.
pub fn capabilities_differ(
    arm: &str,
    (round, other): (u32, &str),
    (first_round, first): (u32, &str),
) -> String {
    format!(
        "arm {arm}: ggml-metal reported different capabilities in round {round} ({other}) than in round {first_round} ({first})"
    )
}

/// An arm meant to run with the shim ran stock; `why` is the activation's description.
pub fn not_activated(arm: &str, why: &str) -> String {
    format!("arm {arm}: {why}; its figures are a stock guest's, not an unlocked one's")
}

/// The shim hooked classes in an arm meant to run without it.
pub fn hooked_without_shim(arm: &str, classes: &[String]) -> String {
    format!(
        "arm {arm}: the shim hooked {} although this arm runs without it; check the environment for \
         DYLD_INSERT_LIBRARIES/LD_PRELOAD",
        classes.join(", ")
    )
}

/// Schema 6: the carry-over of the arms and tests in `each` (as
/// `unlocked pp512 −1.4% [−3.1% +0.4%]`) matters ([`super::design::CarryOver::matters`]).
pub fn carryover_matters(each: &[String]) -> String {
    format!(
        "carry-over: the process after an arm's process ran faster or slower than after stock's \
         ({}; least-squares estimate from the random order, approximate 95% interval): its \
         interval excludes 0 (the rule for this warning). The speedup intervals \
         assume no carry-over, and in simulation a 1% carry-over already lowers a 95% \
         interval's coverage on a quiet machine (docs/bench.md). (No warning merely because \
         the interval or the estimate reaches beyond ±{:.0}%: with a dozen rounds they do so \
         even with no carry-over.) \
         A pause between processes (--cooldown SECONDS) lets the machine settle; more rounds \
         narrow the estimate",
        each.join("; "),
        super::design::CARRYOVER_BOUND * 100.0,
    )
}

/// Schema 6: an arm's processes and stock's differ in duration by `ratio` (median seconds
/// `arm_s` and `stock_s`) and its rounds scatter widely in `tests`.
pub fn unequal_durations(
    arm: &str,
    ratio: f64,
    (arm_s, stock_s): (f64, f64),
    tests: &[String],
) -> String {
    format!(
        "arm {arm}: its processes and stock's differ {ratio:.1}× in duration (median \
         {arm_s:.1} s against {stock_s:.1} s) and its rounds scatter by more than {:.0}% ({}): under \
         disturbances that come and go in wall-clock time the two arms do not meet the machine \
         alike, so the interval's level is approximate. Flagged from {:.0}× apart, not 3×: in \
         simulation arms 2.7× apart in duration already covered as little as 0.82 at 12 rounds \
         (docs/bench.md)",
        super::design::SCATTER * 100.0,
        tests.join(", "),
        super::design::DURATION_RATIO,
    )
}
