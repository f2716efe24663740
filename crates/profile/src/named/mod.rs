//! Named profiles: `stock`, `native` (the host chip's own bare-metal answers) and
//! `apple9-64k` (the first published experiment's), and what a profile claims beyond a chip.
//!
//! - [`chips`]: the chips capshim can match, with their bare-metal answers and the source.
//!
//! `native` is the default wherever the host chip is known; where it is not, the default is
//! `apple9-64k`, and the CLI says so ([`fallback_note`]). `host` is not a profile: it names
//! the bare-metal baseline of a measurement. `--profile host` is read as `native`
//! ([`Lookup::Native`] with `via_host_alias`).

pub mod chips;

use std::fmt;

pub use chips::{
    BARE_METAL_THREADGROUP_MEMORY, CHIPS, CHIPS_SOURCE, Chip, UnknownBrand, match_brand,
};

use crate::family::GpuFamily;
use crate::profile::Profile;

/// `stock`: no shim, the device's own answers.
pub const STOCK: &str = "stock";
/// `native`: the host chip's own bare-metal Apple family and threadgroup memory.
pub const NATIVE: &str = "native";
/// `apple9-64k`: the first published experiment's profile.
pub const APPLE9_64K: &str = "apple9-64k";
/// The profile's former name, still read as `native`.
pub const HOST_ALIAS: &str = "host";
/// Every profile name, in the order `capshim profiles` lists them.
pub const NAMES: [&str; 3] = [STOCK, NATIVE, APPLE9_64K];

/// A profile a user can pick by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamedProfile {
    /// The name on the command line (`stock`, `native`, `apple9-64k`).
    pub name: &'static str,
    /// What it does, one sentence.
    pub summary: &'static str,
    /// Where its values come from.
    pub provenance: &'static str,
    /// The values; `None` for `stock`, which runs without the shim.
    pub profile: Option<Profile>,
}

/// The first published experiment's profile: Apple families through Apple9 (1009), 65536
/// bytes of threadgroup memory. Source: the Cua/Lume shim's README and its M1 Ultra evidence
/// (trycua/cua, libs/lume/metal-capability-shim), repeated by Tart's base images and Anka.
pub fn apple9_64k() -> Profile {
    Profile {
        apple_family_max: 1009,
        max_threadgroup_memory: 65536,
        recommended_working_set_size: None,
    }
}

/// The `native` profile of `chip`: its own bare-metal Apple family and threadgroup memory,
/// the working set unchanged.
pub fn native(chip: &Chip) -> Profile {
    Profile {
        apple_family_max: chip.apple_family,
        max_threadgroup_memory: chip.threadgroup_memory,
        recommended_working_set_size: None,
    }
}

/// What `native` is, one sentence.
pub const NATIVE_SUMMARY: &str =
    "the host chip's own bare-metal answers: its Apple family, 32768 bytes of threadgroup memory";

/// The profiles whose values do not depend on the machine (`stock`, `apple9-64k`); `native`
/// depends on the chip: see [`native`].
pub fn fixed() -> Vec<NamedProfile> {
    vec![
        NamedProfile {
            name: STOCK,
            summary: "no shim: the device's own answers",
            provenance: "the paravirtual device as shipped",
            profile: None,
        },
        NamedProfile {
            name: APPLE9_64K,
            summary: "Apple families through Apple9 (1009), 65536 bytes of threadgroup memory",
            provenance: "the first published experiment's profile (Cua's Lume shim, M1 Ultra host, macOS 26.6.1), also Tart's and Anka's default; it claims more than any chip has (`capshim profiles` says what, per chip)",
            profile: Some(apple9_64k()),
        },
    ]
}

/// Looks up a profile whose values do not depend on the machine (`stock`, `apple9-64k`).
pub fn find(name: &str) -> Option<NamedProfile> {
    fixed().into_iter().find(|p| p.name == name)
}

/// What a `--profile NAME` means.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// A profile whose values do not depend on the machine.
    Fixed(NamedProfile),
    /// `native`: the values come from the host chip.
    Native {
        /// Asked for as `host`, its former name: say that it is now `native`.
        via_host_alias: bool,
    },
    /// No such profile.
    Unknown,
}

/// Looks up a profile name, reading `host` as `native`.
pub fn lookup(name: &str) -> Lookup {
    match name {
        NATIVE => Lookup::Native {
            via_host_alias: false,
        },
        HOST_ALIAS => Lookup::Native {
            via_host_alias: true,
        },
        other => find(other).map_or(Lookup::Unknown, Lookup::Fixed),
    }
}

/// The one-line note for `--profile host`.
pub const HOST_ALIAS_NOTE: &str = "--profile host is now called native (host means only the bare-metal baseline of a measurement); using native";

/// The one-line note when no profile is named and the host chip is not known, so the default
/// is `apple9-64k` instead of `native`. `why` says why the chip is not known.
pub fn fallback_note(why: &str) -> String {
    format!(
        "using apple9-64k, the first published experiment's profile (Apple9, which an M1 or M2 lacks, and 65536 bytes of threadgroup memory, twice what any Apple GPU has), because the host chip is not known: {why}; for native, the chip's own profile, pass the guest's brand, e.g. --cpu-brand \"Apple M1 Ultra (Virtual)\""
    )
}

/// One way a profile's answers differ from a chip's bare-metal answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mismatch {
    /// The profile answers Apple families the chip's GPU does not have.
    FamiliesBeyond {
        /// The chip.
        chip: &'static Chip,
        /// The profile's highest Apple family.
        claimed: i64,
    },
    /// The profile stops below the chip's own highest Apple family (an under-claim: kernels
    /// for the chip's family are not chosen).
    FamiliesShort {
        /// The chip.
        chip: &'static Chip,
        /// The profile's highest Apple family.
        claimed: i64,
    },
    /// The profile claims more threadgroup memory than the chip's GPU has.
    ThreadgroupBeyond {
        /// The chip.
        chip: &'static Chip,
        /// The profile's threadgroup memory, in bytes.
        claimed: u64,
    },
}

impl Mismatch {
    /// Whether this claims something the chip does not have (rather than less than it has).
    pub fn is_over_claim(&self) -> bool {
        !matches!(self, Mismatch::FamiliesShort { .. })
    }
}

fn family_name(value: i64) -> String {
    match GpuFamily(value).name() {
        Some(name) => format!("{name} ({value})"),
        None => value.to_string(),
    }
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Mismatch::FamiliesBeyond { chip, claimed } => {
                let first = family_name(chip.apple_family + 1);
                let range = if claimed == chip.apple_family + 1 {
                    first
                } else {
                    format!("{first} to {}", family_name(claimed))
                };
                write!(
                    f,
                    "claims {range}, which the {} GPU does not have (it has up to {})",
                    chip.name,
                    family_name(chip.apple_family)
                )
            }
            Mismatch::FamiliesShort { chip, claimed } => write!(
                f,
                "stops at {} although the {} GPU has {}, so kernels for its own family are not chosen",
                family_name(claimed),
                chip.name,
                family_name(chip.apple_family)
            ),
            Mismatch::ThreadgroupBeyond { chip, claimed } => write!(
                f,
                "claims {claimed} bytes of threadgroup memory; the {} GPU has {}",
                chip.name, chip.threadgroup_memory
            ),
        }
    }
}

/// How `profile` differs from `chip`'s bare-metal answers: over-claims first, then an
/// under-claimed family. Empty when the profile is the chip's `native` one (or claims less
/// threadgroup memory, which changes nothing: the shim only raises).
pub fn mismatches(profile: &Profile, chip: &'static Chip) -> Vec<Mismatch> {
    let mut out = Vec::new();
    if profile.apple_family_max > chip.apple_family {
        out.push(Mismatch::FamiliesBeyond {
            chip,
            claimed: profile.apple_family_max,
        });
    }
    if profile.max_threadgroup_memory > chip.threadgroup_memory {
        out.push(Mismatch::ThreadgroupBeyond {
            chip,
            claimed: profile.max_threadgroup_memory,
        });
    }
    if profile.apple_family_max < chip.apple_family {
        out.push(Mismatch::FamiliesShort {
            chip,
            claimed: profile.apple_family_max,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chip(name: &str) -> &'static Chip {
        CHIPS.iter().find(|c| c.name == name).unwrap()
    }

    #[test]
    fn native_is_the_chips_own_answers() {
        for (brand, family) in [
            ("Apple M1 Ultra (Virtual)", 1007),
            ("Apple M2 Pro (Virtual)", 1008),
            ("Apple M3 Max", 1009),
            ("Apple M4 (Virtual)", 1009),
            ("Apple M5 (Virtual)", 1010),
        ] {
            let p = native(match_brand(brand).unwrap());
            assert_eq!(p, Profile::new(family, 32768, None).unwrap(), "{brand}");
            assert!(mismatches(&p, match_brand(brand).unwrap()).is_empty());
        }
    }

    #[test]
    fn names_are_looked_up_and_host_is_native() {
        assert_eq!(find("stock").unwrap().profile, None);
        assert_eq!(find("apple9-64k").unwrap().profile, Some(apple9_64k()));
        assert!(find("native").is_none() && find("host").is_none());
        assert_eq!(
            lookup("host"),
            Lookup::Native {
                via_host_alias: true
            }
        );
        assert_eq!(
            lookup("native"),
            Lookup::Native {
                via_host_alias: false
            }
        );
        assert_eq!(lookup("apple10"), Lookup::Unknown);
        assert!(matches!(lookup("apple9-64k"), Lookup::Fixed(p) if p.name == APPLE9_64K));
        assert_eq!(NAMES, ["stock", "native", "apple9-64k"]);
    }

    #[test]
    fn apple9_64k_over_claims_on_every_chip_but_differently() {
        let said = |name: &str| -> Vec<String> {
            mismatches(&apple9_64k(), chip(name))
                .iter()
                .map(|m| m.to_string())
                .collect()
        };
        assert_eq!(
            said("M1"),
            [
                "claims Apple8 (1008) to Apple9 (1009), which the M1 GPU does not have (it has up to Apple7 (1007))",
                "claims 65536 bytes of threadgroup memory; the M1 GPU has 32768"
            ]
        );
        assert_eq!(
            said("M2")[0],
            "claims Apple9 (1009), which the M2 GPU does not have (it has up to Apple8 (1008))"
        );
        assert_eq!(
            said("M4"),
            ["claims 65536 bytes of threadgroup memory; the M4 GPU has 32768"]
        );
        let m5 = mismatches(&apple9_64k(), chip("M5"));
        assert!(m5[0].is_over_claim() && !m5[1].is_over_claim());
        assert!(
            m5[1]
                .to_string()
                .starts_with("stops at Apple9 (1009) although the M5 GPU has Apple10 (1010)")
        );
    }

    #[test]
    fn the_fallback_note_says_why_and_how_to_get_native() {
        let note = fallback_note("this is linux, not macOS");
        assert!(note.contains("because the host chip is not known: this is linux, not macOS"));
        assert!(note.contains("--cpu-brand"));
        assert!(note.starts_with("using apple9-64k"));
    }
}
