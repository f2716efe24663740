//! What a file is, as far as injection cares: a native binary (Mach-O, thin or universal,
//! with each slice's architecture, whether it is a library, and its code signature; or ELF),
//! a `#!` script, or something else. Reads only headers, load commands and the signature.

use object::read::elf::FileHeader;
use object::read::macho::{FatArch, MachHeader, MachOFatFile32, MachOFatFile64};
use object::{FileKind, ReadRef, macho};

use crate::arch::Arch;
use crate::signature::Signature;

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
    /// Whether it is a shared library (Mach-O MH_DYLIB; ELF ET_DYN, with or without an
    /// interpreter).
    pub shared_library: bool,
    /// What its code signature says (Mach-O only; `None` when unsigned).
    pub signature: Option<Signature>,
    /// It has a `__RESTRICT,__restrict` section (Mach-O only): dyld treats the program as
    /// restricted and ignores `DYLD_*` variables (dyld `hasRestrictedSegment`,
    /// `UnsafeHeader::isRestricted`).
    pub restrict_section: bool,
    /// It is FairPlay-encrypted (Mach-O only): its first `LC_ENCRYPTION_INFO` or
    /// `LC_ENCRYPTION_INFO_64` has `cryptid` 1, which the App Store sets (dyld
    /// `UnsafeHeader::isFairPlayEncrypted`). dyld tells AMFI so, and the process gets no
    /// `DYLD_*` variables (docs/apple-runtime.md, rule 11).
    pub fairplay_encrypted: bool,
    /// capshim's version record, when the file carries one (only libcapshim does): the
    /// version of capshim that built it ([`crate::record`]).
    pub version_record: Option<String>,
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
    pub fn arches(&self) -> Vec<Arch> {
        match self {
            Binary::Native { slices, .. } => slices.iter().map(|s| s.arch).collect(),
            _ => Vec::new(),
        }
    }
}

fn thin_slice<'data, Mach: MachHeader, R: ReadRef<'data>>(data: R, offset: u64) -> Option<Slice> {
    let header = Mach::parse(data, offset).ok()?;
    let endian = header.endian().ok()?;
    Some(Slice {
        arch: Arch::from_macho(header.cputype(endian), header.cpusubtype(endian)),
        shared_library: header.filetype(endian) == macho::MH_DYLIB,
        signature: Signature::read::<Mach, R>(header, endian, data, offset),
        restrict_section: has_restrict_section::<Mach, R>(header, endian, data, offset),
        fairplay_encrypted: fairplay_encrypted::<Mach, R>(header, endian, data, offset),
        version_record: crate::record::macho_record::<Mach, R>(header, endian, data, offset),
    })
}

/// Whether a segment named `__RESTRICT` holds a section named `__restrict`, as dyld looks
/// for it. Unreadable load commands count as no such section.
fn has_restrict_section<'data, Mach: MachHeader, R: ReadRef<'data>>(
    header: &Mach,
    endian: Mach::Endian,
    data: R,
    offset: u64,
) -> bool {
    use object::read::macho::{LoadCommandVariant, Section, Segment};
    let Ok(mut commands) = header.load_commands(endian, data, offset) else {
        return false;
    };
    while let Ok(Some(command)) = commands.next() {
        let found = match command.variant() {
            Ok(LoadCommandVariant::Segment32(segment, section_data)) => {
                segment.name() == b"__RESTRICT"
                    && segment
                        .sections(endian, section_data)
                        .is_ok_and(|s| s.iter().any(|s| s.name() == b"__restrict"))
            }
            Ok(LoadCommandVariant::Segment64(segment, section_data)) => {
                segment.name() == b"__RESTRICT"
                    && segment
                        .sections(endian, section_data)
                        .is_ok_and(|s| s.iter().any(|s| s.name() == b"__restrict"))
            }
            _ => false,
        };
        if found {
            return true;
        }
    }
    false
}

/// Whether the first encryption load command (`LC_ENCRYPTION_INFO` or
/// `LC_ENCRYPTION_INFO_64`, whichever comes first, as dyld's
/// `findFairPlayEncryptionLoadCommand` takes it) has `cryptid` 1: dyld's
/// `isFairPlayEncrypted` counts exactly that value ("cryptid is 0 in just-built apps. The
/// AppStore sets cryptid to 1"). Unreadable load commands count as not encrypted.
fn fairplay_encrypted<'data, Mach: MachHeader, R: ReadRef<'data>>(
    header: &Mach,
    endian: Mach::Endian,
    data: R,
    offset: u64,
) -> bool {
    use object::read::macho::LoadCommandVariant;
    let Ok(mut commands) = header.load_commands(endian, data, offset) else {
        return false;
    };
    while let Ok(Some(command)) = commands.next() {
        match command.variant() {
            Ok(LoadCommandVariant::EncryptionInfo32(info)) => return info.cryptid.get(endian) == 1,
            Ok(LoadCommandVariant::EncryptionInfo64(info)) => return info.cryptid.get(endian) == 1,
            _ => {}
        }
    }
    false
}

fn fat_slices<'data, F: FatArch, R: ReadRef<'data>>(data: R, arches: &[F]) -> Vec<Slice> {
    arches
        .iter()
        .map(|arch| {
            // Each slice is read at its offset, never as a whole.
            let offset: u64 = arch.offset().into();
            let mut slice = match FileKind::parse_at(data, offset) {
                Ok(FileKind::MachO64) => {
                    thin_slice::<macho::MachHeader64<object::Endianness>, R>(data, offset)
                }
                Ok(FileKind::MachO32) => {
                    thin_slice::<macho::MachHeader32<object::Endianness>, R>(data, offset)
                }
                _ => None,
            }
            .unwrap_or(Slice {
                arch: Arch::Other(0, 0),
                shared_library: false,
                signature: None,
                restrict_section: false,
                fairplay_encrypted: false,
                version_record: None,
            });
            // The fat table is what the loader matches on.
            slice.arch = Arch::from_macho(arch.cputype(), arch.cpusubtype());
            slice
        })
        .collect()
}

/// How many bytes of a `#!` line are looked at.
const SCRIPT_LINE: u64 = 4096;

/// Reads what a file is from its bytes. Never fails: unreadable structures give
/// [`Binary::Unknown`] or fewer details.
pub fn inspect(data: &[u8]) -> Binary {
    inspect_ref(data)
}

fn script<'data, R: ReadRef<'data>>(data: R) -> Option<Binary> {
    if data.read_bytes_at(0, 2).ok()? != b"#!" {
        return None;
    }
    let end = data.len().ok()?.min(SCRIPT_LINE);
    let line = data
        .read_bytes_at_until(2..end, b'\n')
        .or_else(|()| data.read_bytes_at(2, end.saturating_sub(2)))
        .ok()?;
    let line = String::from_utf8_lossy(line);
    let interpreter = line.split_whitespace().next().unwrap_or_default();
    Some(Binary::Script {
        interpreter: interpreter.to_string(),
    })
}

fn elf<'data, Elf: FileHeader<Endian = object::Endianness>, R: ReadRef<'data>>(data: R) -> Binary {
    // Only the ELF header: e_type and e_machine.
    let Ok(header) = Elf::parse(data) else {
        return Binary::Unknown;
    };
    let Ok(endian) = header.endian() else {
        return Binary::Unknown;
    };
    let arch = match header.e_machine(endian) {
        object::elf::EM_X86_64 => Arch::X86_64,
        object::elf::EM_AARCH64 => Arch::Arm64,
        other => Arch::Other(u32::from(other), 0),
    };
    Binary::Native {
        format: Format::Elf,
        slices: vec![Slice {
            arch,
            // Any ET_DYN is a shared object the loader can preload, including one that
            // also names an interpreter (libc.so.6, PIE executables).
            shared_library: header.e_type(endian) == object::elf::ET_DYN,
            signature: None,
            restrict_section: false,
            fairplay_encrypted: false,
            version_record: crate::record::elf_record::<Elf, R>(header, endian, data),
        }],
    }
}

pub(crate) fn inspect_ref<'data, R: ReadRef<'data>>(data: R) -> Binary {
    if let Some(script) = script(data) {
        return script;
    }
    let Ok(kind) = FileKind::parse(data) else {
        return Binary::Unknown;
    };
    let macho_slices = match kind {
        FileKind::MachO64 => thin_slice::<macho::MachHeader64<object::Endianness>, R>(data, 0)
            .into_iter()
            .collect(),
        FileKind::MachO32 => thin_slice::<macho::MachHeader32<object::Endianness>, R>(data, 0)
            .into_iter()
            .collect(),
        FileKind::MachOFat32 => MachOFatFile32::parse(data)
            .map(|fat| fat_slices(data, fat.arches()))
            .unwrap_or_default(),
        FileKind::MachOFat64 => MachOFatFile64::parse(data)
            .map(|fat| fat_slices(data, fat.arches()))
            .unwrap_or_default(),
        FileKind::Elf32 => return elf::<object::elf::FileHeader32<object::Endianness>, R>(data),
        FileKind::Elf64 => return elf::<object::elf::FileHeader64<object::Endianness>, R>(data),
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
mod tests {
    use super::*;
    use crate::signature::{
        ALLOW_DYLD_ENV, CS_REQUIRE_LV, CS_RESTRICT, CS_RUNTIME, DISABLE_LIBRARY_VALIDATION,
    };
    use crate::testdata::*;

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

    fn signature_of(bytes: &[u8]) -> Option<Signature> {
        match inspect(bytes) {
            Binary::Native { slices, .. } => slices[0].signature.clone(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn hardened_runtime_and_entitlements_are_read() {
        let plain = macho(
            macho::CPU_TYPE_ARM64,
            0,
            macho::MH_EXECUTE,
            Some((0x2, None)),
        );
        assert_eq!(signature_of(&plain), Some(Signature::default()));

        let hardened = macho(
            macho::CPU_TYPE_ARM64,
            0,
            macho::MH_EXECUTE,
            Some((0x2 | CS_RUNTIME, None)),
        );
        assert_eq!(
            signature_of(&hardened),
            Some(Signature {
                hardened_runtime: true,
                ..Default::default()
            })
        );

        let allowed = macho(
            macho::CPU_TYPE_ARM64,
            0,
            macho::MH_EXECUTE,
            Some((
                CS_RUNTIME,
                Some(&entitlements(&[ALLOW_DYLD_ENV, DISABLE_LIBRARY_VALIDATION])),
            )),
        );
        assert_eq!(
            signature_of(&allowed),
            Some(Signature {
                hardened_runtime: true,
                allow_dyld_environment_variables: true,
                disable_library_validation: true,
                ..Default::default()
            })
        );
        assert_eq!(
            signature_of(&macho(macho::CPU_TYPE_ARM64, 0, macho::MH_EXECUTE, None)),
            None
        );
        assert_eq!(Signature::parse(&[0xfa, 0xde]), None);
    }

    #[test]
    fn entitlements_stored_only_in_der_form_are_read() {
        let both = der_entitlements(&[(ALLOW_DYLD_ENV, true), (DISABLE_LIBRARY_VALIDATION, true)]);
        assert_eq!(
            signature_of(&macho_der_signed(CS_RUNTIME, &both)).unwrap(),
            Signature {
                hardened_runtime: true,
                allow_dyld_environment_variables: true,
                disable_library_validation: true,
                ..Default::default()
            }
        );
        // False, and absent, are not true.
        let one = der_entitlements(&[(ALLOW_DYLD_ENV, true), (DISABLE_LIBRARY_VALIDATION, false)]);
        let sig = signature_of(&macho_der_signed(CS_RUNTIME, &one)).unwrap();
        assert!(sig.allow_dyld_environment_variables && !sig.disable_library_validation);
        let none = der_entitlements(&[("com.apple.security.get-task-allow", true)]);
        let sig = signature_of(&macho_der_signed(CS_RUNTIME, &none)).unwrap();
        assert!(!sig.allow_dyld_environment_variables && !sig.disable_library_validation);
    }

    fn slice_of(bytes: &[u8]) -> Slice {
        match inspect(bytes) {
            Binary::Native { slices, .. } => slices[0].clone(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_restrict_section_is_found_only_where_dyld_looks() {
        let exe = |sections: &[(&str, &str)]| {
            macho_with(macho::CPU_TYPE_ARM64, 0, macho::MH_EXECUTE, sections, None)
        };
        assert!(slice_of(&exe(&[("__RESTRICT", "__restrict")])).restrict_section);
        assert!(
            slice_of(&exe(&[("__TEXT", "__text"), ("__RESTRICT", "__restrict")])).restrict_section
        );
        for other in [
            ("__TEXT", "__restrict"),
            ("__RESTRICT", "__text"),
            ("__restrict", "__restrict"),
        ] {
            assert!(!slice_of(&exe(&[other])).restrict_section, "{other:?}");
        }
        assert!(!slice_of(&exe(&[])).restrict_section);
        // In a universal file, per slice.
        let fat = inspect(&universal(&[
            (macho::CPU_TYPE_X86_64, 3, exe(&[])),
            (
                macho::CPU_TYPE_ARM64,
                0,
                macho_with(
                    macho::CPU_TYPE_ARM64,
                    0,
                    macho::MH_EXECUTE,
                    &[("__RESTRICT", "__restrict")],
                    None,
                ),
            ),
        ]));
        let Binary::Native { slices, .. } = fat else {
            panic!("{fat:?}")
        };
        assert_eq!(
            slices
                .iter()
                .map(|s| s.restrict_section)
                .collect::<Vec<_>>(),
            [false, true]
        );
    }

    #[test]
    fn restrict_and_library_validation_flags_and_the_team_are_read() {
        let signed = |flags: u32, team_id: Option<&str>| {
            slice_of(&macho_with(
                macho::CPU_TYPE_ARM64,
                0,
                macho::MH_EXECUTE,
                &[],
                Some(SignatureSpec {
                    flags,
                    entitlements: None,
                    team_id,
                }),
            ))
            .signature
            .expect("signed")
        };
        let sig = signed(0x2 | CS_RESTRICT, None);
        assert!(sig.restrict && !sig.require_library_validation && !sig.hardened_runtime);
        assert_eq!(sig.team_id, None);
        let sig = signed(CS_REQUIRE_LV, Some("ABCDE12345"));
        assert!(!sig.restrict && sig.require_library_validation);
        assert_eq!(sig.team_id.as_deref(), Some("ABCDE12345"));
        let sig = signed(CS_RUNTIME, Some(""));
        assert!(sig.hardened_runtime);
        assert_eq!(sig.team_id, None, "an empty team is no team");
    }

    #[test]
    fn fairplay_encryption_is_cryptid_one_as_dyld_counts_it() {
        let encrypted_of = |bytes: &[u8]| slice_of(bytes).fairplay_encrypted;
        assert!(encrypted_of(&encrypted(1, None)));
        // A just-built app has the command with cryptid 0; dyld counts only 1.
        assert!(!encrypted_of(&encrypted(0, None)));
        assert!(!encrypted_of(&encrypted(2, None)));
        assert!(!encrypted_of(&macho(
            macho::CPU_TYPE_ARM64,
            0,
            macho::MH_EXECUTE,
            None
        )));
        // With a signature after it, still read.
        let signed = encrypted(
            1,
            Some(SignatureSpec {
                flags: CS_RUNTIME,
                ..SignatureSpec::default()
            }),
        );
        assert!(encrypted_of(&signed));
        assert!(slice_of(&signed).signature.unwrap().hardened_runtime);
    }

    /// Each slice's version record.
    fn record_of(binary: &Binary) -> Vec<Option<String>> {
        match binary {
            Binary::Native { slices, .. } => {
                slices.iter().map(|s| s.version_record.clone()).collect()
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn mach_o_slices_carry_their_record() {
        let thin = with_version_record(macho::CPU_TYPE_ARM64, 0, "capshim-version 0.1.0");
        assert_eq!(record_of(&inspect(&thin)), [Some("0.1.0".to_string())]);
        let fat = universal(&[
            (
                macho::CPU_TYPE_X86_64,
                3,
                with_version_record(macho::CPU_TYPE_X86_64, 3, "capshim-version 0.0.9"),
            ),
            (macho::CPU_TYPE_ARM64, 0, thin),
        ]);
        assert_eq!(
            record_of(&inspect(&fat)),
            [Some("0.0.9".to_string()), Some("0.1.0".to_string())]
        );
        // A library without the section, and one whose section holds something else.
        let plain = macho(macho::CPU_TYPE_ARM64, 0, macho::MH_DYLIB, None);
        assert_eq!(record_of(&inspect(&plain)), [None]);
        let other = with_version_record(macho::CPU_TYPE_ARM64, 0, "hello");
        assert_eq!(record_of(&inspect(&other)), [None]);
        // With a code signature after the record, both are read.
        let signed = dylib_with_record(
            macho::CPU_TYPE_ARM64,
            0,
            Some("capshim-version 0.1.0"),
            Some(SignatureSpec {
                flags: 0x2,
                ..SignatureSpec::default()
            }),
        );
        let binary = inspect(&signed);
        assert_eq!(record_of(&binary), [Some("0.1.0".to_string())]);
        let Binary::Native { slices, .. } = &binary else {
            panic!("{binary:?}")
        };
        assert!(slices[0].signature.is_some() && slices[0].shared_library);
    }

    #[test]
    fn elf_files_carry_their_record() {
        use object::write::{Object, StandardSection};
        use object::{Architecture, BinaryFormat, Endianness, SectionKind};
        let build = |contents: &[u8]| {
            let mut obj = Object::new(BinaryFormat::Elf, Architecture::X86_64, Endianness::Little);
            let text = obj.section_id(StandardSection::Text);
            obj.append_section_data(text, &[0xc3], 1);
            let id = obj.add_section(
                Vec::new(),
                crate::record::ELF_SECTION.as_bytes().to_vec(),
                SectionKind::ReadOnlyData,
            );
            obj.append_section_data(id, contents, 1);
            obj.write().unwrap()
        };
        assert_eq!(
            record_of(&inspect(&build(b"capshim-version 0.1.0"))),
            [Some("0.1.0".to_string())]
        );
        assert_eq!(record_of(&inspect(&build(b"not a record"))), [None]);
        assert_eq!(record_of(&inspect(&build(&[b'x'; 300]))), [None]);
    }
}
