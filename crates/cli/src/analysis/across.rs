//! Comparisons whose rounds did not run together in one `capshim bench`'s random order: an arm
//! of one bundle against another bundle's stock (`report b1 b2 --stock b1/stock`), or a bundle
//! arm against files given with `--arm`. Pairing their rounds would be arbitrary (round 3 of
//! one bench has nothing to do with round 3 of another) and would leave out the variance from
//! one session to the next, so such a comparison gets no interval and no verdict: a
//! descriptive ratio of medians, with its spread, and a note saying why.
//!
//! Also here: token generation against a host baseline as the milliseconds each token costs
//! beyond the host, `1000/guest − 1000/host` (tokens/s in, ms/token out), the figure that
//! carries over between models where a ratio does not.

use super::input::ArmInput;
use super::stats;
use crate::llama::TestKey;

/// Whether `arm`'s rounds and `reference`'s ran in one bench's random order: both of one
/// bundle. Files given with `--arm` (no bundle) against each other keep their interval with a
/// warning (capshim cannot know how they ran); a bundle's arm against anything outside its
/// bundle does not.
pub fn one_bench(arm: &ArmInput, reference: &ArmInput) -> bool {
    (arm.group.is_none() && reference.group.is_none()) || arm.group == reference.group
}

/// The spread of the ratio arm / reference without pairing rounds: from the lowest arm round
/// median over the highest reference round median to the highest over the lowest. `None`
/// without rounds or with a median that is not positive.
pub fn spread(arm_rounds: &[f64], reference_rounds: &[f64]) -> Option<[f64; 2]> {
    let (a_lo, a_hi) = stats::range(arm_rounds)?;
    let (r_lo, r_hi) = stats::range(reference_rounds)?;
    (a_lo > 0.0 && r_lo > 0.0).then(|| [a_lo / r_hi, a_hi / r_lo])
}

/// Why a comparison across bundles has no interval, with its spread.
pub fn note(reference: &str, spread: Option<[f64; 2]>) -> String {
    let range = spread.map_or_else(String::new, |[lo, hi]| {
        format!(" (round medians' ratios span {lo:.2}–{hi:.2})")
    });
    format!(
        "no interval: compared with {reference}, whose rounds did not run in the same capshim bench's \
         random order; pairing them would be arbitrary and leave out the variance between sessions, \
         so the speedup is a descriptive ratio of medians{range}, with no interval and no verdict"
    )
}

/// For a token-generation test (prompt 0, generation > 0): the milliseconds each token takes
/// beyond the host, `1000/median − 1000/host` (both in tokens/s). `None` for other tests or a
/// median that is not positive.
pub fn ms_per_token_over_host(key: TestKey, median: f64, host: f64) -> Option<f64> {
    (key.n_prompt == 0 && key.n_gen > 0 && median > 0.0 && host > 0.0)
        .then(|| 1000.0 / median - 1000.0 / host)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overhead_per_token_is_the_difference_of_milliseconds_per_token() {
        let tg = TestKey {
            n_prompt: 0,
            n_gen: 128,
            n_depth: 0,
            quantity: Default::default(),
        };
        // 50 tokens/s is 20 ms a token, 100 tokens/s 10 ms: 10 ms beyond the host.
        let ms = ms_per_token_over_host(tg, 50.0, 100.0).unwrap();
        assert!((ms - 10.0).abs() < 1e-12, "{ms}");
        let pp = TestKey {
            n_prompt: 512,
            n_gen: 0,
            n_depth: 0,
            quantity: Default::default(),
        };
        assert_eq!(ms_per_token_over_host(pp, 50.0, 100.0), None);
    }

    #[test]
    fn the_spread_pairs_no_rounds() {
        assert_eq!(spread(&[2.0, 4.0], &[1.0, 2.0]), Some([1.0, 4.0]));
        assert_eq!(spread(&[], &[1.0]), None);
        assert_eq!(spread(&[1.0], &[0.0]), None);
    }
}
