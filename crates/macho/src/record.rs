//! capshim's version record: which capshim built a library, read from the file without
//! loading it. libcapshim keeps it in a section of its own (`__DATA,__capshim` in the Mach-O
//! build, `.capshim_version` in the ELF one): the bytes of [`RECORD_PREFIX`] and the version,
//! a NUL, and the toolchain that compiled it, e.g.
//! `capshim-version 0.1.0\0rustc 1.95.0 (59807616e 2026-04-14)` (crates/shim/src/version.rs
//! writes it); libraries built before the toolchain was added hold the version alone.

use object::ReadRef;
use object::read::elf::{FileHeader, SectionHeader};
use object::read::macho::{LoadCommandVariant, MachHeader, Section, Segment};

/// What the record starts with; the version follows.
pub const RECORD_PREFIX: &str = "capshim-version ";
/// The Mach-O segment holding the record.
pub const MACHO_SEGMENT: &str = "__DATA";
/// The Mach-O section holding the record.
pub const MACHO_SECTION: &str = "__capshim";
/// The ELF section holding the record.
pub const ELF_SECTION: &str = ".capshim_version";
/// The longest record read, in bytes: a larger section is not a version record.
const MAX_RECORD: u64 = 256;

/// The version in a record's bytes: [`RECORD_PREFIX`] then printable ASCII, up to the first
/// NUL or the end (what follows a NUL, the toolchain or padding, is not read). Anything else
/// is not a record.
pub fn parse_record(bytes: &[u8]) -> Option<String> {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    let text = std::str::from_utf8(&bytes[..end]).ok()?;
    let version = text.strip_prefix(RECORD_PREFIX)?;
    let printable = version.bytes().all(|b| b.is_ascii_graphic());
    (!version.is_empty() && printable).then(|| version.to_string())
}

/// The record of one Mach-O slice starting at `offset`, if it has one.
pub(crate) fn macho_record<'data, Mach: MachHeader, R: ReadRef<'data>>(
    header: &Mach,
    endian: Mach::Endian,
    data: R,
    offset: u64,
) -> Option<String> {
    let mut commands = header.load_commands(endian, data, offset).ok()?;
    while let Ok(Some(command)) = commands.next() {
        // (file offset within the slice, size) of the record section, if this segment has it.
        let found = match command.variant() {
            Ok(LoadCommandVariant::Segment64(segment, section_data))
                if segment.name() == MACHO_SEGMENT.as_bytes() =>
            {
                segment.sections(endian, section_data).ok().and_then(|s| {
                    s.iter()
                        .find(|s| s.name() == MACHO_SECTION.as_bytes())
                        .map(|s| (u64::from(s.offset(endian)), s.size(endian)))
                })
            }
            Ok(LoadCommandVariant::Segment32(segment, section_data))
                if segment.name() == MACHO_SEGMENT.as_bytes() =>
            {
                segment.sections(endian, section_data).ok().and_then(|s| {
                    s.iter()
                        .find(|s| s.name() == MACHO_SECTION.as_bytes())
                        .map(|s| (u64::from(s.offset(endian)), u64::from(s.size(endian))))
                })
            }
            _ => None,
        };
        if let Some((at, size)) = found {
            if size > MAX_RECORD {
                return None;
            }
            let bytes = data.read_bytes_at(offset.checked_add(at)?, size).ok()?;
            return parse_record(bytes);
        }
    }
    None
}

/// The record of an ELF file, if it has one.
pub(crate) fn elf_record<'data, Elf: FileHeader, R: ReadRef<'data>>(
    header: &Elf,
    endian: Elf::Endian,
    data: R,
) -> Option<String> {
    let sections = header.sections(endian, data).ok()?;
    let (_, section) = sections.section_by_name(endian, ELF_SECTION.as_bytes())?;
    if section.sh_size(endian).into() > MAX_RECORD {
        return None;
    }
    parse_record(section.data(endian, data).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_the_prefix_and_a_version() {
        assert_eq!(
            parse_record(b"capshim-version 0.1.0\0\0").as_deref(),
            Some("0.1.0")
        );
        assert_eq!(
            parse_record(b"capshim-version 1.2.3-rc.1").as_deref(),
            Some("1.2.3-rc.1")
        );
        // The record with the toolchain after a NUL, as libraries built since then hold it.
        assert_eq!(
            parse_record(b"capshim-version 0.1.0\0rustc 1.95.0 (59807616e 2026-04-14)").as_deref(),
            Some("0.1.0")
        );
        assert_eq!(
            parse_record(b"capshim-version 0.2.0\0").as_deref(),
            Some("0.2.0")
        );
        for bad in [
            &b""[..],
            b"capshim-version ",
            b"capshim-version 0.1 0",
            b"other 0.1.0",
            b"capshim-version \xff",
            b"capshim-version \0rustc 1.95.0",
            b"\0capshim-version 0.1.0",
        ] {
            assert_eq!(parse_record(bad), None, "{bad:?}");
        }
    }
}
