//! A device's capability answers, as a probe reads them or a profile predicts them.

use std::collections::BTreeMap;

use crate::family::GpuFamily;
use crate::policy;
use crate::profile::Profile;

/// The answers a Metal device gives to the queries capshim cares about.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Answers {
    /// `supportsFamily:` for each asked MTLGPUFamily value (JSON keys are the numbers as strings).
    pub families: BTreeMap<i64, bool>,
    /// `maxThreadgroupMemoryLength`, in bytes.
    pub max_threadgroup_memory: u64,
    /// `recommendedMaxWorkingSetSize`, in bytes, when known.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub recommended_working_set_size: Option<u64>,
}

impl Answers {
    /// The stock "Apple Paravirtual device" seen in a macOS 26.5.2 guest on an M1 Ultra host
    /// (docs/design.md, "The problem, in facts"): Apple1–Apple5 and Common1–Common3 true, every other named family
    /// false, 32768 bytes of threadgroup memory, 11453.25 MB working set in a 16 GiB guest.
    pub fn paravirtual_stock() -> Answers {
        let families = GpuFamily::known()
            .map(|f| {
                (
                    f.0,
                    (1001..=1005).contains(&f.0) || (3001..=3003).contains(&f.0),
                )
            })
            .collect();
        Answers {
            families,
            max_threadgroup_memory: 32768,
            recommended_working_set_size: Some(PARAVIRTUAL_STOCK_WORKING_SET),
        }
    }

    /// `supportsFamily:` for `family`; a family that was not asked counts as false.
    pub fn supports(&self, family: GpuFamily) -> bool {
        self.families.get(&family.0).copied().unwrap_or(false)
    }

    /// The answers a device gives once the shim applies `profile` (the same policy functions
    /// the shim calls). Families not present stay absent.
    pub fn with_profile(&self, profile: &Profile) -> Answers {
        Answers {
            families: self
                .families
                .iter()
                .map(|(&f, &original)| (f, policy::supports_family(profile, f, original)))
                .collect(),
            max_threadgroup_memory: policy::max_threadgroup_memory(
                profile,
                self.max_threadgroup_memory,
            ),
            recommended_working_set_size: self
                .recommended_working_set_size
                .map(|ws| policy::recommended_working_set_size(profile, ws)),
        }
    }

    /// The highest Apple family answered true, as ggml-metal logs it ("GPU family"), if any.
    pub fn highest_apple_family(&self) -> Option<GpuFamily> {
        self.families
            .iter()
            .filter(|&(&f, &yes)| yes && (1001..=1999).contains(&f))
            .map(|(&f, _)| GpuFamily(f))
            .max()
    }
}

/// 11453.25 MB (MiB) in bytes: the stock guest's `recommendedMaxWorkingSetSize` (docs/design.md, "The problem, in facts").
pub const PARAVIRTUAL_STOCK_WORKING_SET: u64 = 12_009_603_072;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stock_paravirtual_answers_match_the_observed_guest() {
        let stock = Answers::paravirtual_stock();
        assert_eq!(stock.highest_apple_family(), Some(GpuFamily(1005)));
        assert!(stock.supports(GpuFamily(3003)));
        assert!(!stock.supports(GpuFamily::METAL3));
        assert_eq!(PARAVIRTUAL_STOCK_WORKING_SET as f64 / 1048576.0, 11453.25);
        let unlocked = stock.with_profile(&Profile::new(1009, 65536, None).unwrap());
        assert_eq!(unlocked.highest_apple_family(), Some(GpuFamily(1009)));
        assert!(!unlocked.supports(GpuFamily(1010)));
        assert!(!unlocked.supports(GpuFamily::METAL3));
        assert_eq!(unlocked.max_threadgroup_memory, 65536);
        assert_eq!(
            unlocked.recommended_working_set_size,
            stock.recommended_working_set_size
        );
    }
}
