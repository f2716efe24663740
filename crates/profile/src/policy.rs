//! The answer policy: raise-only, Apple range only (docs/design.md, "The shape").
//!
//! These are the functions the shim calls with the device's original answer,
//! and the CLI's `explain` calls to predict the result. They never lower an
//! answer and never touch a family outside 1001–1999.

use crate::family::{FamilyRange, GpuFamily};
use crate::profile::Profile;

/// The answer to `-[MTLDevice supportsFamily:]`.
///
/// `original` OR (1001 <= `family` <= `profile.apple_family_max`). Mac,
/// Common, MacCatalyst, Metal and unknown families keep `original`: MLX fails
/// to start if Metal3 is claimed on the paravirtual device.
pub fn supports_family(profile: &Profile, family: i64, original: bool) -> bool {
    if GpuFamily(family).range() != FamilyRange::Apple {
        return original;
    }
    original || family <= profile.apple_family_max
}

/// The answer to `-[MTLDevice maxThreadgroupMemoryLength]`, in bytes: max(original, configured).
pub fn max_threadgroup_memory(profile: &Profile, original: u64) -> u64 {
    original.max(profile.max_threadgroup_memory)
}

/// The answer to `-[MTLDevice recommendedMaxWorkingSetSize]`, in bytes:
/// max(original, configured) when the profile sets it, else `original`.
pub fn recommended_working_set_size(profile: &Profile, original: u64) -> u64 {
    match profile.recommended_working_set_size {
        Some(configured) => original.max(configured),
        None => original,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn profile() -> impl Strategy<Value = Profile> {
        (1001i64..=1999, any::<u64>(), any::<Option<u64>>())
            .prop_map(|(f, t, w)| Profile::new(f, t, w).unwrap())
    }

    #[test]
    fn published_profile_on_stock_paravirtual_answers() {
        let p = Profile::new(1009, 65536, None).unwrap();
        let stock = |f: i64| (1001..=1005).contains(&f) || (3001..=3003).contains(&f);
        for family in GpuFamily::known() {
            let after = supports_family(&p, family.0, stock(family.0));
            let expected = (1001..=1009).contains(&family.0) || (3001..=3003).contains(&family.0);
            assert_eq!(after, expected, "{family}");
        }
        assert!(!supports_family(&p, 5001, false));
        assert!(!supports_family(&p, 1010, false));
        assert_eq!(max_threadgroup_memory(&p, 32768), 65536);
        assert_eq!(max_threadgroup_memory(&p, 131072), 131072);
        assert_eq!(
            recommended_working_set_size(&p, 12_009_603_072),
            12_009_603_072
        );
        let with_ws = Profile::new(1007, 32768, Some(16 << 30)).unwrap();
        assert_eq!(
            recommended_working_set_size(&with_ws, 12_009_603_072),
            16 << 30
        );
        assert_eq!(recommended_working_set_size(&with_ws, 32 << 30), 32 << 30);
    }

    proptest! {
        #[test]
        fn never_lowers_an_answer(p in profile(), family in any::<i64>(), original in any::<bool>(), bytes in any::<u64>()) {
            prop_assert!(supports_family(&p, family, original) >= original);
            prop_assert!(max_threadgroup_memory(&p, bytes) >= bytes);
            prop_assert!(recommended_working_set_size(&p, bytes) >= bytes);
        }

        #[test]
        fn never_changes_a_family_outside_the_apple_range(p in profile(), family in any::<i64>(), original in any::<bool>()) {
            prop_assume!(!(1001..=1999).contains(&family));
            prop_assert_eq!(supports_family(&p, family, original), original);
        }

        #[test]
        fn raises_exactly_the_apple_families_up_to_the_maximum(p in profile(), family in 1001i64..=1999) {
            prop_assert_eq!(supports_family(&p, family, false), family <= p.apple_family_max);
        }
    }
}
