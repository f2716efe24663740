//! Pre-flight reading of executables and libraries with the `object` crate: file format,
//! architectures (each slice of a universal Mach-O), and from a Mach-O code signature
//! whether the hardened runtime is on and which entitlements allow DYLD injection.
//!
//! Pure: it reads bytes, so every rule is tested on any platform with small hand-made
//! Mach-O files.

pub mod signature;

use std::fmt;
use std::ops::Range;
use std::path::Path;

use object::read::elf::FileHeader;
use object::read::macho::{FatArch, MachHeader, MachOFatFile32, MachOFatFile64};
use object::{FileKind, ReadCache, ReadRef, macho};

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
    /// Whether it is a shared library (Mach-O MH_DYLIB; ELF ET_DYN, with or without an
    /// interpreter).
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

fn thin_slice<'data, Mach: MachHeader, R: ReadRef<'data>>(data: R, offset: u64) -> Option<Slice> {
    let header = Mach::parse(data, offset).ok()?;
    let endian = header.endian().ok()?;
    Some(Slice {
        arch: macho_arch(header.cputype(endian), header.cpusubtype(endian)),
        shared_library: header.filetype(endian) == macho::MH_DYLIB,
        signature: signature::read::<Mach, R>(header, endian, data, offset),
    })
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
            });
            // The fat table is what the loader matches on.
            slice.arch = macho_arch(arch.cputype(), arch.cpusubtype());
            slice
        })
        .collect()
}

/// The most bytes one read of a file being inspected may ask for: headers, load commands
/// and a code signature fit many times over; a corrupt size field cannot make capshim
/// read a whole large file.
pub const MAX_READ: u64 = 16 << 20;

/// How many bytes of a `#!` line are looked at.
const SCRIPT_LINE: u64 = 4096;

/// Reads what a file is from its bytes. Never fails: unreadable structures give
/// [`Binary::Unknown`] or fewer details.
#[cfg(test)]
pub fn inspect(data: &[u8]) -> Binary {
    inspect_ref(data)
}

/// Why a file cannot be inspected.
#[derive(Debug)]
pub enum OpenError {
    /// It is not a regular file (a FIFO, device, folder, socket): never opened or read.
    NotRegular(&'static str),
    /// It cannot be found or opened.
    Io(std::io::Error),
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpenError::NotRegular(kind) => write!(f, "it is {kind}, not a regular file"),
            OpenError::Io(e) => write!(f, "{e}"),
        }
    }
}

fn file_kind(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_dir() {
        "a folder"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "a special file"
    }
}

/// Checks from its metadata, without opening it, that `path` is a regular file (following
/// symbolic links).
///
/// # Errors
/// [`OpenError::NotRegular`] naming what it is, or [`OpenError::Io`].
pub fn require_regular(path: &Path) -> Result<(), OpenError> {
    let meta = std::fs::metadata(path).map_err(OpenError::Io)?;
    if meta.is_file() {
        Ok(())
    } else {
        Err(OpenError::NotRegular(file_kind(&meta)))
    }
}

/// As [`inspect`], reading from the file at `path` only the parts needed (headers, load
/// commands, code signature; each read at most [`MAX_READ`] bytes). Refuses anything but a
/// regular file before opening it, so a FIFO or device is never read.
///
/// # Errors
/// [`OpenError`] when it is not a regular file or cannot be opened.
pub fn inspect_file(path: &Path) -> Result<Binary, OpenError> {
    require_regular(path)?;
    let file = std::fs::File::open(path).map_err(OpenError::Io)?;
    // Replaced between the check and the open: check what was opened.
    let meta = file.metadata().map_err(OpenError::Io)?;
    if !meta.is_file() {
        return Err(OpenError::NotRegular(file_kind(&meta)));
    }
    let cache = ReadCache::new(file);
    Ok(inspect_ref(Capped(&cache)))
}

/// A [`ReadRef`] that refuses any single read larger than [`MAX_READ`].
#[derive(Clone, Copy)]
struct Capped<R>(R);

impl<'data, R: ReadRef<'data>> ReadRef<'data> for Capped<R> {
    fn len(self) -> Result<u64, ()> {
        self.0.len()
    }

    fn read_bytes_at(self, offset: u64, size: u64) -> Result<&'data [u8], ()> {
        if size > MAX_READ {
            return Err(());
        }
        self.0.read_bytes_at(offset, size)
    }

    fn read_bytes_at_until(self, range: Range<u64>, delimiter: u8) -> Result<&'data [u8], ()> {
        if range.end.saturating_sub(range.start) > MAX_READ {
            return Err(());
        }
        self.0.read_bytes_at_until(range, delimiter)
    }
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
        }],
    }
}

fn inspect_ref<'data, R: ReadRef<'data>>(data: R) -> Binary {
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
    fn special_files_are_refused_without_being_read() {
        // Reading /dev/zero would never end; a FIFO would block on open.
        let err = inspect_file(Path::new("/dev/zero")).unwrap_err();
        assert!(err.to_string().contains("character device"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        let err = inspect_file(&fifo).unwrap_err();
        assert!(err.to_string().contains("FIFO"), "{err}");
        let err = inspect_file(dir.path()).unwrap_err();
        assert!(err.to_string().contains("folder"), "{err}");
    }

    #[test]
    fn a_universal_file_is_read_slice_by_slice() {
        let fat = universal(&[
            (
                macho::CPU_TYPE_X86_64,
                3,
                macho(macho::CPU_TYPE_X86_64, 3, macho::MH_DYLIB, None),
            ),
            (
                macho::CPU_TYPE_ARM64,
                0,
                macho(macho::CPU_TYPE_ARM64, 0, macho::MH_DYLIB, None),
            ),
        ]);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("libx.dylib");
        std::fs::write(&path, &fat).unwrap();
        assert_eq!(inspect_file(&path).unwrap(), inspect(&fat));
        assert_eq!(inspect(&fat).arches(), vec![Arch::X86_64, Arch::Arm64]);
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
        assert_eq!(
            inspect_file(&std::env::current_exe().unwrap()).unwrap(),
            inspect(&me),
            "reading only the header gives the same answer"
        );
        // ELF header only: 64 bytes, e_type at 16.
        let mut header = me[..64].to_vec();
        header[16..18].copy_from_slice(&object::elf::ET_EXEC.to_le_bytes());
        let Binary::Native { slices, .. } = inspect(&header) else {
            panic!("header alone not recognised")
        };
        assert!(!slices[0].shared_library, "ET_EXEC is not a library");
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
