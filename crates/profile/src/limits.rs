//! Sanity limits: profile values beyond any known Apple GPU, and values that change nothing.
//!
//! One pure decision, [`check`], shared by the CLI (which refuses a value beyond hardware
//! unless `--allow-beyond-hardware` is given, and warns about a value that changes nothing)
//! and the shim (which keeps accepting the published range, 1001–1999 and any byte count, so
//! existing setups keep working, and logs one warning line per finding).

use std::fmt;

use crate::device::PARAVIRTUAL_STOCK_WORKING_SET;
use crate::family::GpuFamily;
use crate::named::chips::{BARE_METAL_THREADGROUP_MEMORY, CHIPS, newest_apple_family};
use crate::profile::Profile;

/// The most threadgroup memory any profile may claim without `--allow-beyond-hardware`, in
/// bytes: the published shims' 65536. Every Apple GPU reports 32768 (see
/// [`BARE_METAL_THREADGROUP_MEMORY`]), so this is already twice what hardware has.
pub const MAX_THREADGROUP_MEMORY: u64 = 65536;

/// A working set below this many bytes (1 GiB) is taken for a unit mistake: every macOS guest
/// reports several GiB (a 16 GiB guest 11453.25 MiB), so such a floor changes nothing. This is
/// capshim's own threshold, not a hardware figure.
pub const MIN_PLAUSIBLE_WORKING_SET: u64 = 1 << 30;

/// The profile value a finding is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    /// `apple_family_max`.
    AppleFamilyMax,
    /// `max_threadgroup_memory`.
    ThreadgroupMemory,
    /// `recommended_working_set_size`.
    WorkingSet,
}

/// One profile value outside what hardware has, or one that changes nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finding {
    /// The Apple family maximum is above the newest family of any known chip.
    FamilyBeyondHardware {
        /// The configured maximum.
        value: i64,
        /// The newest known family (1010 today).
        newest: i64,
    },
    /// Threadgroup memory above [`MAX_THREADGROUP_MEMORY`].
    ThreadgroupBeyondHardware {
        /// The configured floor, in bytes.
        value: u64,
    },
    /// A working set above the machine's physical memory.
    WorkingSetBeyondMemory {
        /// The configured floor, in bytes.
        value: u64,
        /// The machine's physical memory, in bytes.
        physical_memory: u64,
    },
    /// Threadgroup memory below what every device reports: the raise-only policy keeps the
    /// device's own answer.
    ThreadgroupChangesNothing {
        /// The configured floor, in bytes.
        value: u64,
    },
    /// A working set below [`MIN_PLAUSIBLE_WORKING_SET`].
    WorkingSetChangesNothing {
        /// The configured floor, in bytes.
        value: u64,
    },
}

impl Finding {
    /// Whether the value is beyond known hardware (refused by the CLI unless allowed), rather
    /// than one that changes nothing (a warning).
    pub fn beyond_hardware(&self) -> bool {
        matches!(
            self,
            Finding::FamilyBeyondHardware { .. }
                | Finding::ThreadgroupBeyondHardware { .. }
                | Finding::WorkingSetBeyondMemory { .. }
        )
    }

    /// The profile value it is about.
    pub fn field(&self) -> Field {
        match self {
            Finding::FamilyBeyondHardware { .. } => Field::AppleFamilyMax,
            Finding::ThreadgroupBeyondHardware { .. }
            | Finding::ThreadgroupChangesNothing { .. } => Field::ThreadgroupMemory,
            Finding::WorkingSetBeyondMemory { .. } | Finding::WorkingSetChangesNothing { .. } => {
                Field::WorkingSet
            }
        }
    }
}

fn gib(bytes: u64) -> String {
    format!("{:.2} GiB", bytes as f64 / f64::from(1u32 << 30))
}

impl fmt::Display for Finding {
    /// The reason, without the setting's name (the caller names it as the user gave it).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Finding::FamilyBeyondHardware { value, newest } => {
                let chips: Vec<&str> = CHIPS
                    .iter()
                    .filter(|c| c.apple_family == newest)
                    .map(|c| c.name)
                    .collect();
                write!(
                    f,
                    "{value} is above {}, the newest Apple family of any known GPU ({}): no hardware has it",
                    GpuFamily(newest),
                    chips.join(", ")
                )
            }
            Finding::ThreadgroupBeyondHardware { value } => write!(
                f,
                "{value} bytes is above {MAX_THREADGROUP_MEMORY}, more than any Apple GPU has (they report {BARE_METAL_THREADGROUP_MEMORY}; {MAX_THREADGROUP_MEMORY} is the published shims' value)"
            ),
            Finding::WorkingSetBeyondMemory {
                value,
                physical_memory,
            } => write!(
                f,
                "{value} bytes ({}) is above this machine's physical memory, {physical_memory} bytes ({})",
                gib(value),
                gib(physical_memory)
            ),
            Finding::ThreadgroupChangesNothing { value } => write!(
                f,
                "{value} bytes is below the {BARE_METAL_THREADGROUP_MEMORY} bytes every Apple GPU and the stock paravirtual device report, so it changes nothing (the shim only raises answers); values are bytes, e.g. 32768"
            ),
            Finding::WorkingSetChangesNothing { value } => write!(
                f,
                "{value} bytes is below 1 GiB, far less than any macOS guest reports (a 16 GiB guest: {PARAVIRTUAL_STOCK_WORKING_SET} bytes), so it changes nothing (the shim only raises answers); values are bytes, e.g. 68719476736 for 64 GiB"
            ),
        }
    }
}

/// The findings for `profile`, in field order. `physical_memory` is the machine's memory in
/// bytes where known (`sysctl hw.memsize` on macOS); without it the working set is only checked
/// for [`Finding::WorkingSetChangesNothing`].
pub fn check(profile: &Profile, physical_memory: Option<u64>) -> Vec<Finding> {
    let mut out = Vec::new();
    let newest = newest_apple_family();
    if profile.apple_family_max > newest {
        out.push(Finding::FamilyBeyondHardware {
            value: profile.apple_family_max,
            newest,
        });
    }
    let tg = profile.max_threadgroup_memory;
    if tg > MAX_THREADGROUP_MEMORY {
        out.push(Finding::ThreadgroupBeyondHardware { value: tg });
    } else if tg < BARE_METAL_THREADGROUP_MEMORY {
        out.push(Finding::ThreadgroupChangesNothing { value: tg });
    }
    if let Some(ws) = profile.recommended_working_set_size {
        match physical_memory {
            Some(memory) if ws > memory => out.push(Finding::WorkingSetBeyondMemory {
                value: ws,
                physical_memory: memory,
            }),
            _ if ws < MIN_PLAUSIBLE_WORKING_SET => {
                out.push(Finding::WorkingSetChangesNothing { value: ws });
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::named::{CHIPS, apple9_64k, native};
    use proptest::prelude::*;

    #[test]
    fn named_profiles_are_within_hardware() {
        assert!(check(&apple9_64k(), None).is_empty());
        for chip in CHIPS {
            assert!(check(&native(chip), Some(8 << 30)).is_empty(), "{chip:?}");
        }
    }

    #[test]
    fn each_limit_is_found_at_its_edge() {
        let p = |f, tg, ws| Profile::new(f, tg, ws).unwrap();
        assert!(check(&p(1010, 65536, Some(16 << 30)), Some(16 << 30)).is_empty());
        assert_eq!(
            check(&p(1011, 65537, Some((16 << 30) + 1)), Some(16 << 30)),
            [
                Finding::FamilyBeyondHardware {
                    value: 1011,
                    newest: 1010
                },
                Finding::ThreadgroupBeyondHardware { value: 65537 },
                Finding::WorkingSetBeyondMemory {
                    value: (16 << 30) + 1,
                    physical_memory: 16 << 30
                },
            ]
        );
        let absurd = check(&p(1009, 0, Some(64)), None);
        assert_eq!(
            absurd,
            [
                Finding::ThreadgroupChangesNothing { value: 0 },
                Finding::WorkingSetChangesNothing { value: 64 }
            ]
        );
        assert!(absurd.iter().all(|f| !f.beyond_hardware()));
        assert!(check(&p(1009, 32768, Some(1 << 30)), None).is_empty());
        // Without the machine's memory, a large working set is not judged.
        assert!(check(&p(1009, 32768, Some(u64::MAX)), None).is_empty());
    }

    #[test]
    fn reasons_name_the_limit_and_its_source() {
        let f = check(&Profile::new(1999, u64::MAX, None).unwrap(), None);
        assert_eq!(
            f[0].to_string(),
            "1999 is above MTLGPUFamilyApple10 (1010), the newest Apple family of any known GPU (M5): no hardware has it"
        );
        assert!(
            f[1].to_string()
                .starts_with("18446744073709551615 bytes is above 65536")
        );
        assert_eq!(f[1].field(), Field::ThreadgroupMemory);
    }

    proptest! {
        #[test]
        fn a_value_is_flagged_exactly_when_it_is_outside_the_known_range(
            family in 1001i64..=1999,
            tg in any::<u64>(),
            ws in any::<Option<u64>>(),
            memory in any::<Option<u64>>(),
        ) {
            let found = check(&Profile::new(family, tg, ws).unwrap(), memory);
            let has = |field: Field| found.iter().any(|f| f.field() == field);
            prop_assert_eq!(has(Field::AppleFamilyMax), family > 1010);
            prop_assert_eq!(has(Field::ThreadgroupMemory), !(32768..=65536).contains(&tg));
            let ws_flagged = ws.is_some_and(|ws| ws < (1 << 30) || memory.is_some_and(|m| ws > m));
            prop_assert_eq!(has(Field::WorkingSet), ws_flagged);
        }
    }
}
