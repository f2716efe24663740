//! The capability queries the shim answers, and the method signatures it accepts for them.

use std::ffi::CStr;

use capshim_profile::Profile;

use crate::encoding::{self, EIGHT_BYTE_INTEGERS, ONE_BYTE_INTEGERS, SCALAR_RETURNS};

/// Type codes accepted for `supportsFamily:`'s argument: `MTLGPUFamily` is an `NSInteger`
/// (`q` from Apple's compilers, `l` from GCC); a 4-byte `int` (`i`, `I`) is accepted too and
/// read as such (see [`family_argument_is_32_bit`]).
pub const FAMILY_ARGUMENTS: &[u8] = b"iIlLqQ";

/// Whether `supportsFamily:`'s encoding declares a 4-byte argument, whose upper register bits
/// the caller leaves undefined (x86-64 SysV, AAPCS64): the replacement then reads only the low
/// 32 bits.
pub fn family_argument_is_32_bit(types: &[u8]) -> bool {
    encoding::parse(types).is_some_and(|s| matches!(s.arguments.get(2), Some(b'i' | b'I')))
}

/// The queries the shim answers, in table order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Query {
    /// `-supportsFamily:(MTLGPUFamily)` → BOOL.
    SupportsFamily = 0,
    /// `-maxThreadgroupMemoryLength` → NSUInteger, bytes.
    MaxThreadgroupMemory = 1,
    /// `-recommendedMaxWorkingSetSize` → uint64_t, bytes.
    WorkingSet = 2,
}

impl Query {
    /// All queries, in table order.
    pub const ALL: [Query; 3] = [
        Query::SupportsFamily,
        Query::MaxThreadgroupMemory,
        Query::WorkingSet,
    ];

    /// The Objective-C selector.
    pub fn selector(self) -> &'static CStr {
        match self {
            Query::SupportsFamily => c"supportsFamily:",
            Query::MaxThreadgroupMemory => c"maxThreadgroupMemoryLength",
            Query::WorkingSet => c"recommendedMaxWorkingSetSize",
        }
    }

    /// The queries a profile needs hooked: the working set only when configured.
    pub fn wanted(profile: &Profile) -> &'static [Query] {
        if profile.recommended_working_set_size.is_some() {
            &Query::ALL
        } else {
            &Query::ALL[..2]
        }
    }

    /// What the device's method must look like for the replacement to stand in for it:
    /// `supportsFamily:` returns a one-byte BOOL and takes one integer; the two sizes return
    /// an 8-byte integer and take no argument.
    pub fn expected(self) -> Expected {
        match self {
            Query::SupportsFamily => Expected {
                returns: ONE_BYTE_INTEGERS,
                arguments: &[FAMILY_ARGUMENTS],
                describe: "a one-byte BOOL and one integer argument",
            },
            Query::MaxThreadgroupMemory | Query::WorkingSet => Expected {
                returns: EIGHT_BYTE_INTEGERS,
                arguments: &[],
                describe: "an 8-byte integer and no argument",
            },
        }
    }
}

/// The signature of `-[_MTLDevice initGPUFamilySupport]` the base hook accepts: no argument,
/// and a result that fits in one integer register (the replacement passes it through).
pub const BASE_EXPECTED: Expected = Expected {
    returns: SCALAR_RETURNS,
    arguments: &[],
    describe: "a scalar (or no) result and no argument",
};

/// Accepted type codes for a method's return and its arguments after `self` and `_cmd`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expected {
    /// Accepted return type codes.
    pub returns: &'static [u8],
    /// For each argument after `self` and `_cmd`, the accepted type codes.
    pub arguments: &'static [&'static [u8]],
    /// What is expected, for messages.
    pub describe: &'static str,
}

impl Expected {
    /// Whether a method with type encoding `types` has this signature.
    pub fn accepts(&self, types: &[u8]) -> bool {
        let Some(signature) = encoding::parse(types) else {
            return false;
        };
        let [receiver, command, rest @ ..] = signature.arguments.as_slice() else {
            return false;
        };
        *receiver == b'@'
            && *command == b':'
            && self.returns.contains(&signature.returns)
            && rest.len() == self.arguments.len()
            && rest
                .iter()
                .zip(self.arguments)
                .all(|(code, accepted)| accepted.contains(code))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_apple_and_gcc_encodings_of_each_query() {
        let family = Query::SupportsFamily.expected();
        for types in ["B24@0:8q16", "c24@0:8q16", "C24@0:8l16", "C20@0:8i16"] {
            assert!(family.accepts(types.as_bytes()), "{types}");
        }
        for types in [
            "d24@0:8q16",
            "B16@0:8",
            "B32@0:8q16q24",
            "Q24@0:8q16",
            "B24@0:8d16",
            "i24@0:8q16",
            "B20@0:8s16",
        ] {
            assert!(!family.accepts(types.as_bytes()), "{types}");
        }
        assert!(family_argument_is_32_bit(b"C20@0:8i16"));
        assert!(!family_argument_is_32_bit(b"B24@0:8q16"));
        let size = Query::MaxThreadgroupMemory.expected();
        for types in ["Q16@0:8", "L16@0:8", "q16@0:8"] {
            assert!(size.accepts(types.as_bytes()), "{types}");
        }
        for types in [
            "I16@0:8",
            "d16@0:8",
            "{S=QQ}16@0:8",
            "Q24@0:8q16",
            "Q16:0@8",
        ] {
            assert!(!size.accepts(types.as_bytes()), "{types}");
        }
    }

    #[test]
    fn the_base_hook_point_must_return_a_scalar() {
        for types in ["v16@0:8", "B16@0:8", "@16@0:8", "Q16@0:8"] {
            assert!(BASE_EXPECTED.accepts(types.as_bytes()), "{types}");
        }
        for types in ["{S=QQQ}16@0:8", "d16@0:8", "v24@0:8q16", ""] {
            assert!(!BASE_EXPECTED.accepts(types.as_bytes()), "{types}");
        }
    }

    #[test]
    fn the_working_set_is_hooked_only_when_configured() {
        let mut profile = Profile::new(1009, 65536, None).unwrap();
        assert_eq!(
            Query::wanted(&profile),
            &[Query::SupportsFamily, Query::MaxThreadgroupMemory]
        );
        profile.recommended_working_set_size = Some(1);
        assert_eq!(Query::wanted(&profile).len(), 3);
    }
}
