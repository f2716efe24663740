//! Pre-flight reading of executables and libraries with the `object` crate: file format,
//! architectures (each slice of a universal Mach-O), and from a Mach-O code signature
//! whether the hardened runtime is on and which entitlements allow DYLD injection.
//!
//! Pure: it reads bytes, so every rule is tested on any platform with small hand-made
//! Mach-O files.

pub mod signature;

use std::fmt;

use object::read::macho::{FatArch, MachHeader, MachOFatFile32, MachOFatFile64};
use object::{Architecture, FileKind, Object, ObjectKind, macho};

pub use signature::Signature;

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
    /// The architecture this capshim binary runs as.
    #[cfg(test)]
    pub fn this_process() -> Option<Arch> {
        match std::env::consts::ARCH {
            "x86_64" => Some(Arch::X86_64),
            "aarch64" => Some(Arch::Arm64),
            _ => None,
        }
    }
}

/// The container format of a native binary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Mach-O (thin or universal): macOS.
    MachO,
    /// ELF: Linux.
    Elf,
}

/// One architecture slice of a binary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Slice {
    /// Its architecture.
    pub arch: Arch,
    /// Whether it is a shared library (Mach-O MH_DYLIB; ELF ET_DYN without `.interp`).
    pub shared_library: bool,
    /// What its code signature says (Mach-O only; `None` when unsigned).
    pub signature: Option<Signature>,
}

/// What a file is, as far as injection cares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Binary {
    /// A native executable or library.
    Native {
        /// Mach-O or ELF.
        format: Format,
        /// One entry per architecture (several for a universal Mach-O).
        slices: Vec<Slice>,
    },
    /// A `#!` script; the kernel runs its interpreter instead.
    Script {
        /// The interpreter path from the first line.
        interpreter: String,
    },
    /// Not something capshim recognises.
    Unknown,
}

impl Binary {
    /// The architectures of a native binary (empty otherwise).
    #[cfg(test)]
    pub fn arches(&self) -> Vec<Arch> {
        match self {
            Binary::Native { slices, .. } => slices.iter().map(|s| s.arch).collect(),
            _ => Vec::new(),
        }
    }
}

fn macho_arch(cputype: u32, cpusubtype: u32) -> Arch {
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

fn thin_slice<Mach: MachHeader>(data: &[u8]) -> Option<Slice> {
    let header = Mach::parse(data, 0).ok()?;
    let endian = header.endian().ok()?;
    Some(Slice {
        arch: macho_arch(header.cputype(endian), header.cpusubtype(endian)),
        shared_library: header.filetype(endian) == macho::MH_DYLIB,
        signature: signature::read::<Mach>(header, endian, data),
    })
}

fn fat_slices<F: FatArch>(data: &[u8], arches: &[F]) -> Vec<Slice> {
    arches
        .iter()
        .filter_map(|arch| {
            let slice_data = arch.data(data).ok()?;
            let mut slice = match FileKind::parse(slice_data).ok()? {
                FileKind::MachO64 => {
                    thin_slice::<macho::MachHeader64<object::Endianness>>(slice_data)
                }
                FileKind::MachO32 => {
                    thin_slice::<macho::MachHeader32<object::Endianness>>(slice_data)
                }
                _ => None,
            }
            .unwrap_or(Slice {
                arch: Arch::Other(0, 0),
                shared_library: false,
                signature: None,
            });
            // The fat table is what the loader matches on.
            slice.arch = macho_arch(arch.cputype(), arch.cpusubtype());
            Some(slice)
        })
        .collect()
}

/// Reads what a file is from its bytes. Never fails: unreadable structures give
/// [`Binary::Unknown`] or fewer details.
pub fn inspect(data: &[u8]) -> Binary {
    if let Some(rest) = data.strip_prefix(b"#!") {
        let line = rest.split(|&b| b == b'\n').next().unwrap_or_default();
        let line = String::from_utf8_lossy(line);
        let interpreter = line.split_whitespace().next().unwrap_or_default();
        return Binary::Script {
            interpreter: interpreter.to_string(),
        };
    }
    let Ok(kind) = FileKind::parse(data) else {
        return Binary::Unknown;
    };
    let macho_slices = match kind {
        FileKind::MachO64 => thin_slice::<macho::MachHeader64<object::Endianness>>(data)
            .into_iter()
            .collect(),
        FileKind::MachO32 => thin_slice::<macho::MachHeader32<object::Endianness>>(data)
            .into_iter()
            .collect(),
        FileKind::MachOFat32 => MachOFatFile32::parse(data)
            .map(|fat| fat_slices(data, fat.arches()))
            .unwrap_or_default(),
        FileKind::MachOFat64 => MachOFatFile64::parse(data)
            .map(|fat| fat_slices(data, fat.arches()))
            .unwrap_or_default(),
        FileKind::Elf32 | FileKind::Elf64 => {
            let Ok(file) = object::File::parse(data) else {
                return Binary::Unknown;
            };
            let arch = match file.architecture() {
                Architecture::X86_64 => Arch::X86_64,
                Architecture::Aarch64 => Arch::Arm64,
                other => Arch::Other(other as u32, 0),
            };
            return Binary::Native {
                format: Format::Elf,
                slices: vec![Slice {
                    arch,
                    // ET_DYN without an interpreter: PIE executables are ET_DYN too, but
                    // name their dynamic loader in `.interp`.
                    shared_library: file.kind() == ObjectKind::Dynamic
                        && file.section_by_name(".interp").is_none(),
                    signature: None,
                }],
            };
        }
        _ => return Binary::Unknown,
    };
    if macho_slices.is_empty() {
        return Binary::Unknown;
    }
    Binary::Native {
        format: Format::MachO,
        slices: macho_slices,
    }
}

#[cfg(test)]
pub(crate) mod testdata;

#[cfg(test)]
mod tests {
    use super::testdata::*;
    use super::*;

    #[test]
    fn thin_and_universal_mach_o_architectures() {
        let thin = inspect(&macho(macho::CPU_TYPE_ARM64, 0, macho::MH_DYLIB, None));
        assert_eq!(thin.arches(), vec![Arch::Arm64]);
        let Binary::Native { format, slices } = &thin else {
            panic!("{thin:?}")
        };
        assert_eq!(*format, Format::MachO);
        assert!(slices[0].shared_library && slices[0].signature.is_none());

        let e = inspect(&macho(
            macho::CPU_TYPE_ARM64,
            macho::CPU_SUBTYPE_ARM64E | 0x8000_0000,
            macho::MH_EXECUTE,
            None,
        ));
        assert_eq!(e.arches(), vec![Arch::Arm64e]);

        let fat = inspect(&universal(&[
            (
                macho::CPU_TYPE_X86_64,
                3,
                macho(macho::CPU_TYPE_X86_64, 3, macho::MH_EXECUTE, None),
            ),
            (
                macho::CPU_TYPE_ARM64,
                macho::CPU_SUBTYPE_ARM64E,
                macho(
                    macho::CPU_TYPE_ARM64,
                    macho::CPU_SUBTYPE_ARM64E,
                    macho::MH_EXECUTE,
                    None,
                ),
            ),
        ]));
        assert_eq!(fat.arches(), vec![Arch::X86_64, Arch::Arm64e]);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn elf_scripts_and_garbage() {
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let Binary::Native { format, slices } = inspect(&me) else {
            panic!("test binary not recognised")
        };
        assert_eq!(format, Format::Elf);
        assert_eq!(Some(slices[0].arch), Arch::this_process());
        assert!(
            !slices[0].shared_library,
            "a PIE executable is not a library"
        );
        assert_eq!(
            inspect(b"#!/bin/sh -e\necho hi\n"),
            Binary::Script {
                interpreter: "/bin/sh".into()
            }
        );
        assert_eq!(inspect(b"hello"), Binary::Unknown);
        assert_eq!(inspect(&[0xcf, 0xfa, 0xed, 0xfe, 1]), Binary::Unknown);
    }
}
