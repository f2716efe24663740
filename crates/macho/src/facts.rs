//! The facts `cargo xtask dist` checks in a thin 64-bit Mach-O: header, install name,
//! libraries loaded, rpaths, sections, initializers, minimum macOS, code signature and
//! exported names. Pure parsing: the rules live in xtask.

use object::macho;
use object::macho::MachHeader64;
use object::read::macho::{LoadCommandVariant, MachHeader, Nlist, Section, Segment};
use object::{Endianness, FileKind};

use crate::bytes::{slice, trim_nul};
use crate::exports::read_export_trie;
use crate::signature::CodeDirectory;

/// Why a file could not be inspected at all.
#[derive(Debug, thiserror::Error)]
pub enum InspectError {
    /// Not a Mach-O file: what it is instead.
    #[error("not a Mach-O file ({0}); expected a thin 64-bit arm64 Mach-O")]
    NotMachO(String),
    /// A universal (fat) file; dist writes thin files.
    #[error("a universal (fat) Mach-O; expected a thin 64-bit arm64 Mach-O")]
    Universal,
    /// A Mach-O that does not parse.
    #[error("malformed Mach-O: {0}")]
    Malformed(String),
}

impl From<object::Error> for InspectError {
    fn from(error: object::Error) -> Self {
        InspectError::Malformed(error.to_string())
    }
}

/// One library the file loads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dependency {
    /// The load command: `LC_LOAD_DYLIB`, `LC_LOAD_WEAK_DYLIB`, `LC_REEXPORT_DYLIB`...
    pub command: &'static str,
    /// The install name of the library.
    pub path: String,
}

/// One section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SectionFact {
    /// Segment name, e.g. `__DATA_CONST`.
    pub segment: String,
    /// Section name, e.g. `__mod_init_func`.
    pub name: String,
    /// Size in bytes.
    pub size: u64,
    /// `flags & SECTION_TYPE`, e.g. `S_MOD_INIT_FUNC_POINTERS`.
    pub section_type: u32,
}

/// One symbol the file takes from a library (an undefined external in `LC_SYMTAB`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Import {
    /// The symbol, with Mach-O's leading `_`.
    pub name: String,
    /// The install name of the library it binds to (two-level namespace: the library
    /// ordinal in `n_desc`), or `None` for a flat or dynamic lookup, or an ordinal that
    /// names no library.
    pub library: Option<String>,
}

/// What [`Facts::read`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Facts {
    /// `cputype` from the header.
    pub cpu_type: u32,
    /// `cpusubtype` from the header, without the capability bits.
    pub cpu_subtype: u32,
    /// `filetype` from the header.
    pub file_type: u32,
    /// `LC_ID_DYLIB`, when present.
    pub install_name: Option<String>,
    /// Every library load command, in order.
    pub dependencies: Vec<Dependency>,
    /// `LC_RPATH` entries.
    pub rpaths: Vec<String>,
    /// Every section of every segment.
    pub sections: Vec<SectionFact>,
    /// `LC_ROUTINES_64` (an old-style initializer) is present.
    pub has_routines: bool,
    /// The signature, or why there is none usable.
    pub signature: Result<CodeDirectory, String>,
    /// Names in the export trie (what dyld lets other images bind to).
    pub exports: Vec<String>,
    /// `LC_BUILD_VERSION` (or `LC_VERSION_MIN_MACOSX`): platform number (1 = macOS), minimum
    /// OS and SDK versions, encoded `xxxx.yy.zz` as dyld does.
    pub build_version: Option<(u32, u32, u32)>,
    /// Every symbol it imports, sorted by name.
    pub imports: Vec<Import>,
}

impl Facts {
    /// Parses `data` as a thin 64-bit Mach-O file.
    ///
    /// # Errors
    /// [`InspectError`] when it is not one (another format, a universal file) or does not
    /// parse.
    pub fn read(data: &[u8]) -> Result<Facts, InspectError> {
        match FileKind::parse(data) {
            Ok(FileKind::MachO64) => {}
            Ok(FileKind::MachOFat32 | FileKind::MachOFat64) => return Err(InspectError::Universal),
            Ok(FileKind::MachO32) => {
                return Err(InspectError::Malformed(
                    "a 32-bit Mach-O; expected 64-bit arm64".into(),
                ));
            }
            Ok(other) => return Err(InspectError::NotMachO(format!("{other:?}"))),
            Err(_) => return Err(InspectError::NotMachO("unrecognised format".into())),
        }
        let header = MachHeader64::<Endianness>::parse(data, 0)?;
        let endian = header.endian()?;
        let mut facts = Facts {
            cpu_type: header.cputype(endian),
            cpu_subtype: header.cpusubtype(endian) & !macho::CPU_SUBTYPE_MASK,
            file_type: header.filetype(endian),
            install_name: None,
            dependencies: Vec::new(),
            rpaths: Vec::new(),
            sections: Vec::new(),
            has_routines: false,
            signature: Err("no LC_CODE_SIGNATURE load command".into()),
            exports: Vec::new(),
            build_version: None,
            imports: Vec::new(),
        };
        let mut undefined: Vec<(String, u8)> = Vec::new();
        let mut export_trie: Option<(u32, u32)> = None;
        let mut commands = header.load_commands(endian, data, 0)?;
        while let Some(command) = commands.next()? {
            let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
            match command.variant()? {
                LoadCommandVariant::IdDylib(dylib) => {
                    facts.install_name = Some(text(command.string(endian, dylib.dylib.name)?));
                }
                LoadCommandVariant::Dylib(dylib) => facts.dependencies.push(Dependency {
                    command: dylib_command_name(command.cmd()),
                    path: text(command.string(endian, dylib.dylib.name)?),
                }),
                LoadCommandVariant::Rpath(rpath) => {
                    facts.rpaths.push(text(command.string(endian, rpath.path)?));
                }
                LoadCommandVariant::Segment64(segment, section_data) => {
                    for section in segment.sections(endian, section_data)? {
                        facts.sections.push(SectionFact {
                            segment: text(trim_nul(section.segment_name())),
                            name: text(trim_nul(section.name())),
                            size: section.size(endian),
                            section_type: section.flags(endian) & macho::SECTION_TYPE,
                        });
                    }
                }
                LoadCommandVariant::Routines64(_) => facts.has_routines = true,
                LoadCommandVariant::Symtab(symtab) => {
                    let table = symtab.symbols::<MachHeader64<Endianness>, _>(endian, data)?;
                    for nlist in table.iter() {
                        let kind = nlist.n_type();
                        if kind & macho::N_STAB == 0
                            && kind & macho::N_TYPE == macho::N_UNDF
                            && kind & macho::N_EXT != 0
                        {
                            let name = nlist.name(endian, table.strings())?;
                            let ordinal = (nlist.n_desc(endian) >> 8) as u8;
                            undefined.push((text(name), ordinal));
                        }
                    }
                }
                LoadCommandVariant::BuildVersion(build) => {
                    facts.build_version = Some((
                        build.platform.get(endian),
                        build.minos.get(endian),
                        build.sdk.get(endian),
                    ));
                }
                LoadCommandVariant::VersionMin(version)
                    if command.cmd() == macho::LC_VERSION_MIN_MACOSX =>
                {
                    facts.build_version = Some((
                        macho::PLATFORM_MACOS,
                        version.version.get(endian),
                        version.sdk.get(endian),
                    ));
                }
                LoadCommandVariant::DyldInfo(info) => {
                    export_trie = Some((info.export_off.get(endian), info.export_size.get(endian)));
                }
                LoadCommandVariant::LinkeditData(linkedit) => {
                    let (offset, size) =
                        (linkedit.dataoff.get(endian), linkedit.datasize.get(endian));
                    match command.cmd() {
                        macho::LC_DYLD_EXPORTS_TRIE => export_trie = Some((offset, size)),
                        macho::LC_CODE_SIGNATURE => {
                            facts.signature = CodeDirectory::read(data, offset, size);
                        }
                        _ => {}
                    }
                }
                _ => {}
            }
        }
        facts.imports = undefined
            .into_iter()
            .map(|(name, ordinal)| Import {
                name,
                library: usize::from(ordinal)
                    .checked_sub(1)
                    .and_then(|index| facts.dependencies.get(index))
                    .map(|d| d.path.clone()),
            })
            .collect();
        facts.imports.sort_by(|a, b| a.name.cmp(&b.name));
        if let Some((offset, size)) = export_trie {
            let trie = slice(data, offset, size)
                .ok_or_else(|| InspectError::Malformed("export trie outside the file".into()))?;
            facts.exports = read_export_trie(trie).map_err(InspectError::Malformed)?;
            facts.exports.sort();
        }
        Ok(facts)
    }
}

/// The name of the load command `cmd` that loads a library.
fn dylib_command_name(cmd: u32) -> &'static str {
    match cmd {
        macho::LC_LOAD_DYLIB => "LC_LOAD_DYLIB",
        macho::LC_LOAD_WEAK_DYLIB => "LC_LOAD_WEAK_DYLIB",
        macho::LC_REEXPORT_DYLIB => "LC_REEXPORT_DYLIB",
        macho::LC_LAZY_LOAD_DYLIB => "LC_LAZY_LOAD_DYLIB",
        macho::LC_LOAD_UPWARD_DYLIB => "LC_LOAD_UPWARD_DYLIB",
        _ => "dylib command",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linux_files_are_not_macho() {
        // This test binary is an ELF file on Linux (and a Mach-O executable on a Mac).
        let exe = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        if cfg!(target_os = "linux") {
            let error = Facts::read(&exe).unwrap_err();
            assert!(error.to_string().contains("not a Mach-O"), "{error}");
        }
        let so = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../target/release/libcapshim.so");
        if let Ok(so) = std::fs::read(so) {
            assert!(
                Facts::read(&so)
                    .unwrap_err()
                    .to_string()
                    .contains("not a Mach-O")
            );
        }
        assert!(matches!(
            Facts::read(b"plain text, not a binary"),
            Err(InspectError::NotMachO(_))
        ));
        assert!(Facts::read(&[]).is_err());
    }
}
