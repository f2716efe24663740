//! The Apple Silicon chips capshim can match, each with what its GPU answers on bare metal.
//!
//! The table is data: a new chip is one more row of [`CHIPS`] (and, for a new family, one
//! more name in [`crate::family`]). Everything else (the `native` profile, the sanity limits,
//! what `apple9-64k` over-claims) is computed from it.

use std::fmt;

/// One chip generation and its bare-metal GPU answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Chip {
    /// The generation as the CPU brand names it: `M1` in "Apple M1 Ultra (Virtual)".
    pub name: &'static str,
    /// The highest Apple MTLGPUFamily its GPU supports on bare metal (1007 = Apple7).
    pub apple_family: i64,
    /// Its bare-metal `maxThreadgroupMemoryLength`, in bytes.
    pub threadgroup_memory: u64,
}

/// Bare-metal threadgroup memory of every Apple Silicon GPU so far, in bytes.
///
/// Source: Apple's Metal feature set tables ("maximum total threadgroup memory allocation",
/// 32 KB since Apple4); JuliaGPU/Metal.jl PR 828 guards on the same value.
pub const BARE_METAL_THREADGROUP_MEMORY: u64 = 32768;

/// Where the rows of [`CHIPS`] come from.
pub const CHIPS_SOURCE: &str = "Apple's Metal feature set tables (developer.apple.com/metal/feature-sets, May 2026): \
M1-series Apple7, M2-series Apple8, M3- and M4-series Apple9, M5-series Apple10; \
32768 bytes of threadgroup memory on every Apple GPU since Apple4 (also JuliaGPU/Metal.jl PR 828)";

/// Every chip generation capshim can match, oldest first. Pro, Max and Ultra variants share
/// their generation's row (the feature set tables list them together).
pub const CHIPS: &[Chip] = &[
    Chip {
        name: "M1",
        apple_family: 1007,
        threadgroup_memory: BARE_METAL_THREADGROUP_MEMORY,
    },
    Chip {
        name: "M2",
        apple_family: 1008,
        threadgroup_memory: BARE_METAL_THREADGROUP_MEMORY,
    },
    Chip {
        name: "M3",
        apple_family: 1009,
        threadgroup_memory: BARE_METAL_THREADGROUP_MEMORY,
    },
    Chip {
        name: "M4",
        apple_family: 1009,
        threadgroup_memory: BARE_METAL_THREADGROUP_MEMORY,
    },
    Chip {
        name: "M5",
        apple_family: 1010,
        threadgroup_memory: BARE_METAL_THREADGROUP_MEMORY,
    },
];

/// The highest Apple family of any chip in [`CHIPS`] (1010, Apple10, today).
pub fn newest_apple_family() -> i64 {
    CHIPS
        .iter()
        .map(|chip| chip.apple_family)
        .max()
        .unwrap_or(1007)
}

/// A CPU brand string capshim does not know how to match.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownBrand(pub String);

impl UnknownBrand {
    /// What is wrong, without advice on options (commands differ in the options they take):
    /// the brand and the known chips.
    pub fn problem(&self) -> String {
        let known: Vec<String> = CHIPS
            .iter()
            .map(|chip| format!("Apple {}*", chip.name))
            .collect();
        format!(
            "CPU brand {:?} is not a known Apple Silicon chip (known: {})",
            self.0,
            known.join(", ")
        )
    }
}

impl fmt::Display for UnknownBrand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}; give the brand of a known chip, use --profile apple9-64k, or give explicit values with --family-max and --threadgroup-memory",
            self.problem()
        )
    }
}

impl std::error::Error for UnknownBrand {}

/// The chip a CPU brand names, as a Mac reports it (`sysctl machdep.cpu.brand_string`: "Apple
/// M2 Pro") or a macOS guest does (with " (Virtual)": "Apple M1 Ultra (Virtual)").
///
/// # Errors
/// [`UnknownBrand`] when the brand names no chip in [`CHIPS`].
pub fn match_brand(cpu_brand: &str) -> Result<&'static Chip, UnknownBrand> {
    let model = cpu_brand
        .trim()
        .strip_prefix("Apple ")
        .and_then(|rest| rest.split_whitespace().next())
        .ok_or_else(|| UnknownBrand(cpu_brand.to_string()))?;
    CHIPS
        .iter()
        .find(|chip| chip.name == model)
        .ok_or_else(|| UnknownBrand(cpu_brand.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::family::GpuFamily;

    #[test]
    fn brands_match_their_generation() {
        for (brand, chip) in [
            ("Apple M1 Ultra (Virtual)", "M1"),
            ("Apple M1", "M1"),
            ("Apple M2 Pro (Virtual)", "M2"),
            ("Apple M3 Max", "M3"),
            ("Apple M4 (Virtual)", "M4"),
            ("  Apple M5 Pro (Virtual)\n", "M5"),
        ] {
            assert_eq!(match_brand(brand).unwrap().name, chip, "{brand}");
        }
        for brand in ["Intel(R) Core(TM) i9", "Apple M10", "Apple", "", "M1 Ultra"] {
            let err = match_brand(brand).unwrap_err();
            assert!(err.to_string().contains("Apple M1*, Apple M2*"), "{err}");
        }
    }

    #[test]
    fn every_row_names_a_known_apple_family() {
        for chip in CHIPS {
            let name = GpuFamily(chip.apple_family).name().unwrap();
            assert!(name.starts_with("Apple"), "{chip:?}");
        }
        assert_eq!(newest_apple_family(), 1010);
    }
}
