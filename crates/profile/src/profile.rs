//! The values a profile raises.

use std::fmt;

use crate::family::GpuFamily;

/// What capshim answers on top of the device's own answers.
///
/// Every field only ever raises an answer (see [`crate::policy`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Profile {
    /// Highest Apple MTLGPUFamily answered true: 1001 (Apple1) to 1999 inclusive.
    pub apple_family_max: i64,
    /// Floor for `maxThreadgroupMemoryLength`, in bytes.
    pub max_threadgroup_memory: u64,
    /// Floor for `recommendedMaxWorkingSetSize`, in bytes; `None` leaves the working set alone.
    pub recommended_working_set_size: Option<u64>,
}

/// Why a set of profile values is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProfileError {
    /// `apple_family_max` is outside 1001–1999 (wide enough for any `i64` or `u64` input).
    FamilyOutOfRange(i128),
}

impl fmt::Display for ProfileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProfileError::FamilyOutOfRange(value) => write!(
                f,
                "Apple family maximum {value} is outside 1001 (Apple1) to 1999; \
                 use e.g. 1007 for Apple7 (M1) or 1009 for Apple9 (M3/M4)"
            ),
        }
    }
}

impl std::error::Error for ProfileError {}

impl Profile {
    /// The threadgroup memory a profile raises to unless told otherwise, in bytes (64 KiB),
    /// as in the published tested profile (docs/design.md, "The problem, in facts").
    pub const DEFAULT_MAX_THREADGROUP_MEMORY: u64 = 65536;

    /// Builds a validated profile.
    ///
    /// # Errors
    /// [`ProfileError::FamilyOutOfRange`] when `apple_family_max` is not in 1001–1999.
    pub fn new(
        apple_family_max: i64,
        max_threadgroup_memory: u64,
        recommended_working_set_size: Option<u64>,
    ) -> Result<Profile, ProfileError> {
        if !(GpuFamily::APPLE_MIN..=GpuFamily::APPLE_BLOCK_MAX).contains(&apple_family_max) {
            return Err(ProfileError::FamilyOutOfRange(apple_family_max.into()));
        }
        Ok(Profile {
            apple_family_max,
            max_threadgroup_memory,
            recommended_working_set_size,
        })
    }
}

impl fmt::Display for Profile {
    /// `apple_family_max=1009 (Apple9) max_threadgroup_memory=65536 recommended_working_set_size=unchanged`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "apple_family_max={}", self.apple_family_max)?;
        if let Some(name) = GpuFamily(self.apple_family_max).name() {
            write!(f, " ({name})")?;
        }
        write!(f, " max_threadgroup_memory={}", self.max_threadgroup_memory)?;
        match self.recommended_working_set_size {
            Some(bytes) => write!(f, " recommended_working_set_size={bytes}"),
            None => write!(f, " recommended_working_set_size=unchanged"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn family_range_is_enforced_inclusively() {
        assert!(Profile::new(1001, 0, None).is_ok());
        assert!(Profile::new(1999, 0, None).is_ok());
        assert_eq!(
            Profile::new(1000, 0, None),
            Err(ProfileError::FamilyOutOfRange(1000))
        );
        assert_eq!(
            Profile::new(2000, 0, None),
            Err(ProfileError::FamilyOutOfRange(2000))
        );
        assert_eq!(
            Profile::new(5001, 0, None),
            Err(ProfileError::FamilyOutOfRange(5001))
        );
    }

    #[test]
    fn display_names_every_value() {
        let p = Profile::new(1009, 65536, Some(1 << 34)).unwrap();
        assert_eq!(
            p.to_string(),
            "apple_family_max=1009 (Apple9) max_threadgroup_memory=65536 recommended_working_set_size=17179869184"
        );
    }
}
