//! The order in which arms run: rounds alternate direction (A B, B A, A B, ...), so that a
//! slow drift of the machine over time (heat, another workload) hits every arm alike.

/// One run of one arm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    /// 1-based round number.
    pub round: u32,
    /// Index of the arm in the arm list.
    pub arm: usize,
}

/// Every run of `arms` arms over `rounds` rounds: odd rounds in the given order, even rounds
/// reversed (ABBA... for two arms, ABCCBA... for three).
pub fn interleave(arms: usize, rounds: u32) -> Vec<Slot> {
    let mut slots = Vec::with_capacity(arms * rounds as usize);
    for round in 1..=rounds {
        let order: Box<dyn Iterator<Item = usize>> = if round % 2 == 1 {
            Box::new(0..arms)
        } else {
            Box::new((0..arms).rev())
        };
        slots.extend(order.map(|arm| Slot { round, arm }));
    }
    slots
}

#[cfg(test)]
mod tests {
    use super::*;

    fn letters(arms: usize, rounds: u32) -> String {
        interleave(arms, rounds)
            .iter()
            .map(|s| (b'A' + s.arm as u8) as char)
            .collect()
    }

    #[test]
    fn rounds_alternate_direction() {
        assert_eq!(letters(2, 1), "AB");
        assert_eq!(letters(2, 2), "ABBA");
        assert_eq!(letters(2, 4), "ABBAABBA");
        assert_eq!(letters(3, 2), "ABCCBA");
        assert_eq!(letters(1, 3), "AAA");
        assert!(interleave(2, 0).is_empty());
        let rounds: Vec<u32> = interleave(2, 2).iter().map(|s| s.round).collect();
        assert_eq!(rounds, vec![1, 1, 2, 2]);
    }

    #[test]
    fn every_arm_runs_once_per_round_and_sits_at_the_same_mean_position() {
        for arms in 1..5 {
            let slots = interleave(arms, 4);
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
}
