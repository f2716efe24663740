//! Which chip the host is: from `--cpu-brand`, else from this machine's CPU brand.

use capshim_profile::named::{self, CHIPS, Chip, UnknownBrand};
use serde::Serialize;

use crate::platform::Machine;

/// How `--cpu-brand` is named in messages.
pub const GIVEN: &str = "--cpu-brand";
/// How the machine's own brand is named in messages.
pub const DETECTED: &str = "sysctl machdep.cpu.brand_string";

/// The host chip, matched from a CPU brand.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ChipMatch {
    /// The chip's row of the chip table.
    pub chip: &'static Chip,
    /// The brand it was matched from, trimmed.
    pub brand: String,
    /// Where the brand came from: [`GIVEN`] or [`DETECTED`].
    pub matched_from: &'static str,
}

impl ChipMatch {
    /// `M1, matched from CPU brand "Apple M1 Ultra (Virtual)" (--cpu-brand)`.
    pub fn describe(&self) -> String {
        format!(
            "{}, matched from CPU brand {:?} ({})",
            self.chip.name, self.brand, self.matched_from
        )
    }
}

/// The host chip: matched from `given` (`--cpu-brand`) when present, else from the machine's
/// brand. `Ok(Err(why))` when the chip is not known here (not macOS, or a brand no row of the
/// chip table matches), with why in words.
///
/// # Errors
/// [`UnknownBrand`] when `given` matches no known chip: the user named a chip, so guessing
/// another profile would be wrong.
pub fn find(
    given: Option<&str>,
    machine: &dyn Machine,
) -> Result<Result<ChipMatch, String>, UnknownBrand> {
    let matched = |brand: &str, matched_from| {
        named::match_brand(brand).map(|chip| ChipMatch {
            chip,
            brand: brand.trim().to_string(),
            matched_from,
        })
    };
    if let Some(brand) = given {
        return matched(brand, GIVEN).map(Ok);
    }
    Ok(match machine.cpu_brand() {
        Err(why) => Err(why),
        Ok(brand) => matched(&brand, DETECTED).map_err(|_| {
            let known: Vec<&str> = CHIPS.iter().map(|c| c.name).collect();
            format!(
                "the CPU brand {:?} ({DETECTED}) names none of the chips Apple {}",
                brand.trim(),
                known.join(", Apple ")
            )
        }),
    })
}

#[cfg(test)]
pub mod fake {
    //! A machine with given facts, for tests.

    use crate::platform::Machine;

    /// Facts to answer with.
    #[derive(Clone, Debug)]
    pub struct FakeMachine {
        /// The CPU brand, or why it cannot be read.
        pub brand: Result<String, String>,
        /// The physical memory, or why it cannot be read.
        pub memory: Result<u64, String>,
    }

    impl FakeMachine {
        /// Linux: neither fact can be read.
        pub fn linux() -> FakeMachine {
            FakeMachine {
                brand: Err("this is linux, not macOS".into()),
                memory: Err("this is linux".into()),
            }
        }

        /// A macOS guest with this brand and memory.
        pub fn guest(brand: &str, memory: u64) -> FakeMachine {
            FakeMachine {
                brand: Ok(brand.into()),
                memory: Ok(memory),
            }
        }
    }

    impl Machine for FakeMachine {
        fn cpu_brand(&self) -> Result<String, String> {
            self.brand.clone()
        }

        fn physical_memory(&self) -> Result<u64, String> {
            self.memory.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fake::FakeMachine;
    use super::*;

    #[test]
    fn a_given_brand_wins_and_an_unknown_one_is_an_error() {
        let guest = FakeMachine::guest("Apple M4 Pro (Virtual)", 16 << 30);
        let m = find(Some(" Apple M1 Ultra (Virtual)\n"), &guest)
            .unwrap()
            .unwrap();
        assert_eq!(
            m.describe(),
            "M1, matched from CPU brand \"Apple M1 Ultra (Virtual)\" (--cpu-brand)"
        );
        assert!(find(Some("Intel Xeon"), &guest).is_err());
        assert_eq!(find(None, &guest).unwrap().unwrap().chip.name, "M4");
    }

    #[test]
    fn an_unknown_machine_says_why() {
        assert_eq!(
            find(None, &FakeMachine::linux()).unwrap(),
            Err("this is linux, not macOS".to_string())
        );
        let why = find(None, &FakeMachine::guest("Apple M9 (Virtual)", 0))
            .unwrap()
            .unwrap_err();
        assert!(why.contains("\"Apple M9 (Virtual)\" (sysctl"), "{why}");
        assert!(why.contains("Apple M1, Apple M2"), "{why}");
    }
}
