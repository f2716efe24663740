//! The order in which arms run: rounds run the arms forward or reversed in pairs (A B, A B,
//! B A, B A, ...; [`reversed`]), so that a slow drift of the machine over time (heat, another
//! workload) and the position in a round hit every arm alike, and the same arm runs twice in
//! a row at only half of the round boundaries.

use crate::analysis::interval::reversed;

/// One run of one arm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    /// 1-based round number.
    pub round: u32,
    /// Index of the arm in the arm list.
    pub arm: usize,
}

/// Every run of `arms` arms over `rounds` rounds: rounds 1 and 2 in the given order, 3 and 4
/// reversed, and so on (ABABBABA... for two arms, ABCABCCBACBA... for three). Made one run at a
/// time, so that any number of rounds costs no memory up front.
pub fn interleave(arms: usize, rounds: u32) -> impl Iterator<Item = Slot> {
    (1..=rounds).flat_map(move |round| {
        let backwards = reversed(round);
        (0..arms).map(move |i| Slot {
            round,
            arm: if backwards { arms - 1 - i } else { i },
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn letters(arms: usize, rounds: u32) -> String {
        interleave(arms, rounds)
            .map(|s| (b'A' + s.arm as u8) as char)
            .collect()
    }

    #[test]
    fn rounds_reverse_in_pairs() {
        assert_eq!(letters(2, 1), "AB");
        assert_eq!(letters(2, 2), "ABAB");
        assert_eq!(letters(2, 4), "ABABBABA");
        assert_eq!(letters(2, 8), "ABABBABAABABBABA");
        assert_eq!(letters(3, 4), "ABCABCCBACBA");
        assert_eq!(letters(1, 3), "AAA");
        assert_eq!(interleave(2, 0).count(), 0);
        let rounds: Vec<u32> = interleave(2, 2).map(|s| s.round).collect();
        assert_eq!(rounds, vec![1, 1, 2, 2]);
        // The same arm twice in a row at every other round boundary, not at every one (ABBA).
        let s = letters(2, 10);
        let boundaries: Vec<bool> = (1..10)
            .map(|r| s.as_bytes()[2 * r - 1] == s.as_bytes()[2 * r])
            .collect();
        assert_eq!(boundaries.iter().filter(|b| **b).count(), 4, "{s}");
    }

    #[test]
    fn every_arm_runs_once_per_round_and_sits_at_the_same_mean_position() {
        for arms in 1..5 {
            let slots: Vec<Slot> = interleave(arms, 4).collect();
            for arm in 0..arms {
                let positions: Vec<usize> = slots
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| s.arm == arm)
                    .map(|(i, _)| i % arms)
                    .collect();
                assert_eq!(positions.len(), 4);
                // Over an even number of rounds every arm's mean position in a round is the middle.
                assert_eq!(positions.iter().sum::<usize>() * 2, 4 * (arms - 1));
            }
        }
    }

    #[test]
    fn the_largest_round_count_costs_nothing_up_front() {
        // Building every slot of u32::MAX rounds first would need 2^33 slots of memory.
        let first: Vec<Slot> = interleave(2, u32::MAX).take(8).collect();
        let letters: String = first.iter().map(|s| (b'A' + s.arm as u8) as char).collect();
        assert_eq!(letters, "ABABBABA");
        assert_eq!(first[7].round, 4);
    }
}
