//! Which chip the host is: from `--cpu-brand`, else from this machine's CPU brand.

use capshim_profile::named::{self, CHIPS, Chip, UnknownBrand};
use serde::Serialize;

use crate::platform::facts::SystemFacts;

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
    machine: &dyn SystemFacts,
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
mod tests {
    use super::*;
    use crate::platform::facts::Fake;

    #[test]
    fn a_given_brand_wins_and_an_unknown_one_is_an_error() {
        let guest = Fake::guest("Apple M4 Pro (Virtual)", 16 << 30);
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
            find(None, &Fake::linux()).unwrap(),
            Err(
                "this is linux, not macOS, so there is no machdep.cpu.brand_string to read"
                    .to_string()
            )
        );
        let why = find(None, &Fake::guest("Apple M9 (Virtual)", 0))
            .unwrap()
            .unwrap_err();
        assert!(why.contains("\"Apple M9 (Virtual)\" (sysctl"), "{why}");
        assert!(why.contains("Apple M1, Apple M2"), "{why}");
    }
}
