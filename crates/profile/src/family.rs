//! MTLGPUFamily values, as Metal's `MTLGPUFamily` enumeration numbers them.
//!
//! Source: Apple's Metal headers (`MTLDevice.h`):
//! Apple1–Apple10 = 1001–1010, Mac1 = 2001 (deprecated),
//! Mac2 = 2002, Common1–3 = 3001–3003, MacCatalyst1–2 = 4001–4002,
//! Metal3 = 5001, Metal4 = 5002.

use std::fmt;

/// The block of the MTLGPUFamily numbering a value falls in.
///
/// Only [`FamilyRange::Apple`] answers are ever changed by capshim: MLX turns
/// on residency sets when `supportsFamily(Metal3)` is true, and the
/// paravirtual device cannot create them (docs/design.md, "The problem, in facts").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize),
    serde(rename_all = "lowercase")
)]
pub enum FamilyRange {
    /// 1001–1999: Apple GPU generations (Apple1 … Apple10 and any future one).
    Apple,
    /// 2000–2999: Mac families.
    Mac,
    /// 3000–3999: Common families.
    Common,
    /// 4000–4999: Mac Catalyst families.
    MacCatalyst,
    /// 5000–5999: Metal feature-set families (Metal3, Metal4).
    Metal,
    /// Anything else, including negative numbers.
    Unknown,
}

/// One MTLGPUFamily value (an `NSInteger` in Metal, so any `i64` can be asked).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize), serde(transparent))]
pub struct GpuFamily(pub i64);

/// Every named MTLGPUFamily value with its Metal name, in numeric order.
const NAMES: &[(i64, &str)] = &[
    (1001, "Apple1"),
    (1002, "Apple2"),
    (1003, "Apple3"),
    (1004, "Apple4"),
    (1005, "Apple5"),
    (1006, "Apple6"),
    (1007, "Apple7"),
    (1008, "Apple8"),
    (1009, "Apple9"),
    (1010, "Apple10"),
    (2001, "Mac1"),
    (2002, "Mac2"),
    (3001, "Common1"),
    (3002, "Common2"),
    (3003, "Common3"),
    (4001, "MacCatalyst1"),
    (4002, "MacCatalyst2"),
    (5001, "Metal3"),
    (5002, "Metal4"),
];

impl GpuFamily {
    /// Apple7 (1007): M1-class GPUs; llama.cpp's gate for simdgroup matrix multiply.
    pub const APPLE7: GpuFamily = GpuFamily(1007);
    /// Apple6 (1006): one of llama.cpp's gates for bfloat.
    pub const APPLE6: GpuFamily = GpuFamily(1006);
    /// Metal3 (5001): llama.cpp's other gate for simdgroup reduction and bfloat; MLX's gate for residency sets.
    pub const METAL3: GpuFamily = GpuFamily(5001);
    /// Metal4 (5002): llama.cpp's gate for its tensor API.
    pub const METAL4: GpuFamily = GpuFamily(5002);
    /// The lowest Apple family value, Apple1.
    pub const APPLE_MIN: i64 = 1001;
    /// The highest value still in the Apple block (future Apple families).
    pub const APPLE_BLOCK_MAX: i64 = 1999;

    /// Every named family, in numeric order (Apple1 … Metal4, with the deprecated Mac1).
    pub fn known() -> impl Iterator<Item = GpuFamily> {
        NAMES.iter().map(|&(value, _)| GpuFamily(value))
    }

    /// The Metal name without the `MTLGPUFamily` prefix ("Apple7"), if the value is named.
    pub fn name(self) -> Option<&'static str> {
        NAMES
            .iter()
            .find(|&&(value, _)| value == self.0)
            .map(|&(_, name)| name)
    }

    /// Looks a family up by its name, with or without the `MTLGPUFamily` prefix, ignoring case.
    pub fn from_name(name: &str) -> Option<GpuFamily> {
        let bare = name.strip_prefix("MTLGPUFamily").unwrap_or(name);
        NAMES
            .iter()
            .find(|(_, n)| n.eq_ignore_ascii_case(bare))
            .map(|&(value, _)| GpuFamily(value))
    }

    /// The block this value belongs to.
    pub fn range(self) -> FamilyRange {
        match self.0 {
            1001..=1999 => FamilyRange::Apple,
            2000..=2999 => FamilyRange::Mac,
            3000..=3999 => FamilyRange::Common,
            4000..=4999 => FamilyRange::MacCatalyst,
            5000..=5999 => FamilyRange::Metal,
            _ => FamilyRange::Unknown,
        }
    }
}

impl fmt::Display for GpuFamily {
    /// `MTLGPUFamilyApple7 (1007)`, or the bare number for an unnamed value.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => write!(f, "MTLGPUFamily{name} ({})", self.0),
            None => write!(f, "{}", self.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_ranges_match_the_numbering() {
        for family in GpuFamily::known() {
            let name = family.name().unwrap();
            assert_eq!(GpuFamily::from_name(name), Some(family));
            let expected = match name {
                n if n.starts_with("MacCatalyst") => FamilyRange::MacCatalyst,
                n if n.starts_with("Apple") => FamilyRange::Apple,
                n if n.starts_with("Mac") => FamilyRange::Mac,
                n if n.starts_with("Common") => FamilyRange::Common,
                _ => FamilyRange::Metal,
            };
            assert_eq!(family.range(), expected, "{name}");
        }
        assert_eq!(
            GpuFamily::from_name("MTLGPUFamilyapple9"),
            Some(GpuFamily(1009))
        );
        assert_eq!(GpuFamily(1005).to_string(), "MTLGPUFamilyApple5 (1005)");
        assert_eq!(GpuFamily(1500).range(), FamilyRange::Apple);
        assert_eq!(GpuFamily(-1).range(), FamilyRange::Unknown);
        assert_eq!(GpuFamily::known().count(), 19);
    }
}
