//! CPU architectures as the loader matches them.

use std::fmt;

use object::macho;

/// A CPU architecture as the loader matches it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    /// x86_64 (Intel; Rosetta on Apple Silicon).
    X86_64,
    /// arm64 (Apple Silicon, the ABI third-party code uses; aarch64 on Linux).
    Arm64,
    /// arm64e (pointer authentication ABI; Apple's own platform binaries).
    Arm64e,
    /// Anything else, with the Mach-O cputype/cpusubtype or ELF machine number.
    Other(u32, u32),
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Arch::X86_64 => f.write_str("x86_64"),
            Arch::Arm64 => f.write_str("arm64"),
            Arch::Arm64e => f.write_str("arm64e"),
            Arch::Other(t, s) => write!(f, "cpu type {t:#x} subtype {s:#x}"),
        }
    }
}

impl Arch {
    /// The architecture this program runs as (`None` for one capshim does not name).
    pub fn this_process() -> Option<Arch> {
        match std::env::consts::ARCH {
            "x86_64" => Some(Arch::X86_64),
            "aarch64" => Some(Arch::Arm64),
            _ => None,
        }
    }

    /// The architecture a Mach-O header or fat table entry names.
    pub fn from_macho(cputype: u32, cpusubtype: u32) -> Arch {
        match cputype {
            macho::CPU_TYPE_X86_64 => Arch::X86_64,
            macho::CPU_TYPE_ARM64
                if cpusubtype & !macho::CPU_SUBTYPE_MASK == macho::CPU_SUBTYPE_ARM64E =>
            {
                Arch::Arm64e
            }
            macho::CPU_TYPE_ARM64 => Arch::Arm64,
            _ => Arch::Other(cputype, cpusubtype),
        }
    }
}
