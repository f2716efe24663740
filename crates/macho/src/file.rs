//! Reading a file on disk as [`inspect`](crate::inspect) reads bytes, safely: a special file
//! (FIFO, device, folder, socket) is refused from its metadata without being opened, and no
//! single read may ask for more than [`MAX_READ`] bytes.

use std::fmt;
use std::ops::Range;
use std::path::Path;

use object::{ReadCache, ReadRef};

use crate::binary::{Binary, inspect_ref};

/// The most bytes one read of a file being inspected may ask for: headers, load commands
/// and a code signature fit many times over; a corrupt size field cannot make capshim
/// read a whole large file.
pub const MAX_READ: u64 = 16 << 20;

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

/// What a file that is not a regular file is, in words: `a folder`, `a FIFO (named pipe)`,
/// `a character device`, `a block device`, `a socket`, or `a special file`.
pub fn file_kind(meta: &std::fs::Metadata) -> &'static str {
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

/// As [`inspect`](crate::inspect), reading from the file at `path` only the parts needed (headers, load
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

#[cfg(test)]
mod tests {
    use object::macho;

    use super::*;
    use crate::arch::Arch;
    use crate::binary::inspect;
    use crate::testdata::*;

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
        assert_eq!(format, crate::binary::Format::Elf);
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
