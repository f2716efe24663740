//! Named profiles, including the one matched to the host chip.

use std::fmt;

use crate::family::GpuFamily;
use crate::profile::Profile;

/// A profile a user can pick by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamedProfile {
    /// The name on the command line (`stock`, `apple9-64k`, `host`).
    pub name: &'static str,
    /// What it does, one sentence.
    pub summary: &'static str,
    /// Where its values come from.
    pub provenance: &'static str,
    /// The values; `None` for `stock`, which runs without the shim.
    pub profile: Option<Profile>,
}

/// Bare-metal threadgroup memory of every Apple Silicon GPU so far, in bytes (DESIGN.md section 1).
pub const BARE_METAL_THREADGROUP_MEMORY: u64 = 32768;

/// The published tested profile: Apple families through Apple9 (1009), 65536 bytes of
/// threadgroup memory (DESIGN.md section 2).
pub fn apple9_64k() -> Profile {
    Profile {
        apple_family_max: 1009,
        max_threadgroup_memory: 65536,
        recommended_working_set_size: None,
    }
}

/// The fixed named profiles (`stock`, `apple9-64k`). `host` depends on the machine: see [`host`].
pub fn fixed() -> Vec<NamedProfile> {
    vec![
        NamedProfile {
            name: "stock",
            summary: "no shim: the device's own answers",
            provenance: "the paravirtual device as shipped",
            profile: None,
        },
        NamedProfile {
            name: "apple9-64k",
            summary: "Apple families through Apple9 (1009), 65536 bytes of threadgroup memory",
            provenance: "the published process-scoped shim's tested profile (M1 Ultra host, macOS 26.6.1)",
            profile: Some(apple9_64k()),
        },
    ]
}

/// Looks up a fixed named profile (`stock`, `apple9-64k`).
pub fn find(name: &str) -> Option<NamedProfile> {
    fixed().into_iter().find(|p| p.name == name)
}

/// The Apple Silicon chip generations capshim can match, with their bare-metal Apple family.
///
/// Source: DESIGN.md section 1: M1-class Apple7, M2 Apple8, M3 and M4 Apple9, M5 Apple10.
pub const CHIPS: [(&str, i64); 5] = [
    ("M1", 1007),
    ("M2", 1008),
    ("M3", 1009),
    ("M4", 1009),
    ("M5", 1010),
];

/// A CPU brand string capshim does not know how to match.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownBrand(pub String);

impl UnknownBrand {
    /// What is wrong, without advice on options (commands differ in the options they take):
    /// the brand and the known chips.
    pub fn problem(&self) -> String {
        let known: Vec<String> = CHIPS
            .iter()
            .map(|(chip, _)| format!("Apple {chip}*"))
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
            "{}; use --profile apple9-64k or give explicit values with --family-max and --threadgroup-memory",
            self.problem()
        )
    }
}

impl std::error::Error for UnknownBrand {}

/// The host's own bare-metal profile, from the CPU brand a guest reports
/// (`sysctl machdep.cpu.brand_string`, e.g. "Apple M1 Ultra (Virtual)").
///
/// Returns the profile and the chip generation matched ("M1"). The profile answers the
/// Apple families the host GPU really has and keeps bare-metal threadgroup memory (32768
/// bytes), so kernels are chosen as on the host without claiming features it lacks.
///
/// # Errors
/// [`UnknownBrand`] when the brand names no known chip.
pub fn host(cpu_brand: &str) -> Result<(Profile, &'static str), UnknownBrand> {
    let brand = cpu_brand.trim();
    let model = brand
        .strip_prefix("Apple ")
        .and_then(|rest| rest.split_whitespace().next())
        .ok_or_else(|| UnknownBrand(cpu_brand.to_string()))?;
    let (chip, family) = CHIPS
        .iter()
        .find(|(chip, _)| *chip == model)
        .ok_or_else(|| UnknownBrand(cpu_brand.to_string()))?;
    let profile = Profile {
        apple_family_max: *family,
        max_threadgroup_memory: BARE_METAL_THREADGROUP_MEMORY,
        recommended_working_set_size: None,
    };
    debug_assert!(GpuFamily(profile.apple_family_max).name().is_some());
    Ok((profile, chip))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_profile_follows_the_chip_generation() {
        for (brand, family, chip) in [
            ("Apple M1 Ultra (Virtual)", 1007, "M1"),
            ("Apple M1", 1007, "M1"),
            ("Apple M2 Pro (Virtual)", 1008, "M2"),
            ("Apple M3 Max", 1009, "M3"),
            ("Apple M4 (Virtual)", 1009, "M4"),
            ("  Apple M5 Pro (Virtual)\n", 1010, "M5"),
        ] {
            let (profile, matched) = host(brand).unwrap();
            assert_eq!(
                (profile.apple_family_max, matched),
                (family, chip),
                "{brand}"
            );
            assert_eq!(profile.max_threadgroup_memory, 32768);
        }
        for brand in ["Intel(R) Core(TM) i9", "Apple M10", "Apple", "", "M1 Ultra"] {
            let err = host(brand).unwrap_err();
            assert!(err.to_string().contains("apple9-64k"), "{err}");
        }
    }

    #[test]
    fn fixed_profiles_are_found_by_name() {
        assert_eq!(find("stock").unwrap().profile, None);
        assert_eq!(find("apple9-64k").unwrap().profile, Some(apple9_64k()));
        assert!(find("host").is_none());
        assert!(Profile::new(1009, 65536, None).unwrap() == apple9_64k());
    }
}
