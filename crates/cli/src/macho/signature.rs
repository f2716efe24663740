//! The parts of a Mach-O code signature that decide whether DYLD variables reach a program.
//!
//! Layout from Apple's open-source `cs_blobs.h` (xnu): `LC_CODE_SIGNATURE` points at a
//! big-endian SuperBlob (magic 0xfade0cc0) indexing a CodeDirectory (magic 0xfade0c02,
//! `flags` at byte 12; `CS_RUNTIME` = 0x10000 is the hardened runtime) and an XML
//! entitlements blob (magic 0xfade7171).

use object::read::macho::MachHeader;
use object::{ReadRef, macho};

const SUPERBLOB_MAGIC: u32 = 0xfade_0cc0;
const CODE_DIRECTORY_MAGIC: u32 = 0xfade_0c02;
const ENTITLEMENTS_MAGIC: u32 = 0xfade_7171;
const CS_RUNTIME: u32 = 0x0001_0000;

/// Entitlement that lets `DYLD_INSERT_LIBRARIES` reach a hardened-runtime program.
pub const ALLOW_DYLD_ENV: &str = "com.apple.security.cs.allow-dyld-environment-variables";
/// Entitlement that lets a hardened-runtime program load libraries signed by someone else
/// (an ad-hoc signed libcapshim.dylib).
pub const DISABLE_LIBRARY_VALIDATION: &str = "com.apple.security.cs.disable-library-validation";

/// What a code signature says about injection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Signature {
    /// The hardened runtime is on (`CS_RUNTIME` in a CodeDirectory's flags).
    pub hardened_runtime: bool,
    /// The `com.apple.security.cs.allow-dyld-environment-variables` entitlement is true.
    pub allow_dyld_environment_variables: bool,
    /// The `com.apple.security.cs.disable-library-validation` entitlement is true.
    pub disable_library_validation: bool,
}

fn be32(data: &[u8], at: usize) -> Option<u32> {
    let bytes = data.get(at..at.checked_add(4)?)?;
    Some(u32::from_be_bytes(bytes.try_into().ok()?))
}

/// Parses the SuperBlob bytes `LC_CODE_SIGNATURE` points at.
pub(crate) fn parse_superblob(blob: &[u8]) -> Option<Signature> {
    if be32(blob, 0)? != SUPERBLOB_MAGIC {
        return None;
    }
    let count = be32(blob, 8)? as usize;
    let mut signature = Signature::default();
    for index in 0..count.min(64) {
        let offset = be32(blob, 12 + index * 8 + 4)? as usize;
        match be32(blob, offset) {
            Some(CODE_DIRECTORY_MAGIC) => {
                let flags = be32(blob, offset + 12).unwrap_or(0);
                signature.hardened_runtime |= flags & CS_RUNTIME != 0;
            }
            Some(ENTITLEMENTS_MAGIC) => {
                let length = be32(blob, offset + 4).unwrap_or(0) as usize;
                let Some(xml) = blob.get(offset + 8..offset.saturating_add(length)) else {
                    continue;
                };
                let Ok(value) = plist::Value::from_reader_xml(xml) else {
                    continue;
                };
                let Some(dict) = value.as_dictionary() else {
                    continue;
                };
                let yes = |key: &str| dict.get(key).and_then(|v| v.as_boolean()) == Some(true);
                signature.allow_dyld_environment_variables |= yes(ALLOW_DYLD_ENV);
                signature.disable_library_validation |= yes(DISABLE_LIBRARY_VALIDATION);
            }
            _ => {}
        }
    }
    Some(signature)
}

/// Reads the code signature of one thin Mach-O, if it has one.
/// `offset` is where the thin Mach-O starts in `data` (a slice of a universal file).
pub(super) fn read<'data, Mach: MachHeader, R: ReadRef<'data>>(
    header: &Mach,
    endian: Mach::Endian,
    data: R,
    offset: u64,
) -> Option<Signature> {
    let mut commands = header.load_commands(endian, data, offset).ok()?;
    while let Ok(Some(command)) = commands.next() {
        if command.cmd() != macho::LC_CODE_SIGNATURE {
            continue;
        }
        let link = command
            .data::<macho::LinkeditDataCommand<Mach::Endian>>()
            .ok()?;
        let start = offset.checked_add(u64::from(link.dataoff.get(endian)))?;
        let size = u64::from(link.datasize.get(endian));
        let blob = data.read_bytes_at(start, size).ok()?;
        return parse_superblob(blob);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::super::testdata::*;
    use super::super::{Binary, inspect};
    use super::*;

    fn signature_of(bytes: &[u8]) -> Option<Signature> {
        match inspect(bytes) {
            Binary::Native { slices, .. } => slices[0].signature,
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
            })
        );
        assert_eq!(
            signature_of(&macho(macho::CPU_TYPE_ARM64, 0, macho::MH_EXECUTE, None)),
            None
        );
        assert_eq!(parse_superblob(&[0xfa, 0xde]), None);
    }
}
